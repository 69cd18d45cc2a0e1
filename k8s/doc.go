// Package k8s is the parent of the Kubernetes conventions a CSI driver needs
// and the CSI spec does not name: kubelet plugin registration
// (k8s/registration), the well-known parameter and volume-context keys the
// Kubernetes sidecars and kubelet add (k8s/keys), the CSIDriver object
// derived from a driver's capabilities (k8s/csidriver) and the test-driver
// file of Kubernetes' storage e2e suite derived from the same (k8s/testdriver).
//
// None of these packages imports k8s.io/api, k8s.io/apimachinery or
// client-go: they speak the wire formats and field names of those APIs with
// small types of their own, so a driver that does not use them pays nothing.
package k8s
