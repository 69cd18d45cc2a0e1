package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A relative socket path, as typed at a shell, is made absolute; a CO's
// forms pass unchanged.
func TestAbsEndpoint(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"run/csi.sock":          filepath.Join(wd, "run/csi.sock"),
		"./csi.sock":            filepath.Join(wd, "csi.sock"),
		"/run/csi.sock":         "/run/csi.sock",
		"unix:///run/csi.sock":  "unix:///run/csi.sock",
		"tcp://127.0.0.1:10000": "tcp://127.0.0.1:10000",
		"":                      "",
	} {
		if got := absEndpoint(in); got != want {
			t.Errorf("absEndpoint(%q) = %q, want %q", in, got, want)
		}
	}
}
