package kube

import (
	"strings"
	"testing"
)

func TestCheckExtraNodes(t *testing.T) {
	for _, tc := range []struct {
		extra []NodeOptions
		want  string // substring of the error; empty: valid
	}{
		{nil, ""},
		{[]NodeOptions{{Name: "node-2"}, {Name: "node-3"}}, ""},
		{[]NodeOptions{{Name: ""}}, "not a DNS label"},
		{[]NodeOptions{{Name: "Node_2"}}, "not a DNS label"},
		{[]NodeOptions{{Name: strings.Repeat("n", 64)}}, "not a DNS label"},
		{[]NodeOptions{{Name: "node-1"}}, "used twice"},
		{[]NodeOptions{{Name: "node-2"}, {Name: "node-2"}}, "used twice"},
	} {
		err := checkExtraNodes("node-1", tc.extra)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.extra, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one with %q", tc.extra, err, tc.want)
		}
	}
}

func TestKubeletNodeWithoutKubelet(t *testing.T) {
	e := &Env{}
	if n, ok := e.KubeletNode("node-1"); ok {
		t.Errorf("KubeletNode without the kubelet mode = %+v, true", n)
	}
	if _, err := e.FreezeNode("node-1"); err == nil {
		t.Error("FreezeNode without the kubelet mode: no error")
	}
}
