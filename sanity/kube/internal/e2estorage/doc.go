// Package e2estorage is the storage-only build of Kubernetes' e2e suite:
// its test binary (`go test -c -tags e2estorage`, which
// kube.EnsureE2EBinaries builds as e2e.test) runs the external storage
// suites (test/e2e/storage/external, ginkgo focus External.Storage) with
// the flags, suite setup and file sources of upstream's e2e.test, but links
// none of the other SIGs' specs: a fraction of the full suite's build on a
// cold cache. Its test file has the build tag so that `go vet ./...` and
// `go test ./...` of this module neither build nor run it.
package e2estorage
