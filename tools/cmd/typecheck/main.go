// Command typecheck type-checks Go packages, their tests and everything
// they import, from source, for the platform in GOOS and GOARCH, without
// compiling anything: CI's check that the SDK builds where vendors develop
// (macOS, Windows). A cross-build (GOOS=darwin go build ./...) compiles
// the whole dependency graph for a platform nothing here runs on — 138
// CPU-seconds per platform on an empty build cache on CI's 2-core machine
// — and leaves the tests out; this checks the tests as well in about 9.
//
//	GOOS=windows go run ./cmd/typecheck -C .. ./...
//
// What it cannot see is what only a compiler or linker reports (a missing
// assembly body, a go:linkname target), which the project's code does not
// use. Each error is printed as file:line:col: message; the exit status is
// 1 when there is any, 2 when the packages cannot be loaded.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/tools/go/packages"
)

func main() {
	dir := flag.String("C", ".", "run in this directory (the module's root)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: [GOOS=os] [GOARCH=arch] typecheck [-C dir] packages...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(*dir, flag.Args(), os.Stdout, os.Stderr))
}

// run type-checks patterns in dir for the platform the environment names
// and reports to stdout and stderr; it returns the exit status.
func run(dir string, patterns []string, stdout, stderr io.Writer) int {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedImports | packages.NeedDeps |
			packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo,
		Dir:   dir,
		Tests: true,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		fmt.Fprintln(stderr, "typecheck:", err)
		return 2
	}
	if len(pkgs) == 0 {
		fmt.Fprintf(stderr, "typecheck: no packages match %v in %s\n", patterns, dir)
		return 2
	}
	errs, count := 0, 0
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		count++
		for _, e := range p.Errors {
			fmt.Fprintln(stderr, e)
			errs++
		}
	})
	platform := goEnv("GOOS", runtime.GOOS) + "/" + goEnv("GOARCH", runtime.GOARCH)
	if errs > 0 {
		fmt.Fprintf(stderr, "typecheck: %d errors (%s)\n", errs, platform)
		return 1
	}
	fmt.Fprintf(stdout, "typecheck: %d packages with their tests and imports, no errors (%s)\n", count, platform)
	return 0
}

// goEnv is the platform variable k as set, or def, the platform this
// command was built for (the go command's default too), when unset.
func goEnv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
