package csidriver

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// wire is the object in storage.k8s.io/v1's JSON shape; field order is the
// API's, which encoding/json keeps.
type wire struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   wireMeta `json:"metadata"`
	Spec       wireSpec `json:"spec"`
}

type wireMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

type wireSpec struct {
	AttachRequired                     *bool              `json:"attachRequired,omitempty"`
	PodInfoOnMount                     *bool              `json:"podInfoOnMount,omitempty"`
	VolumeLifecycleModes               []LifecycleMode    `json:"volumeLifecycleModes,omitempty"`
	StorageCapacity                    *bool              `json:"storageCapacity,omitempty"`
	FSGroupPolicy                      FSGroupPolicy      `json:"fsGroupPolicy,omitempty"`
	TokenRequests                      []wireTokenRequest `json:"tokenRequests,omitempty"`
	RequiresRepublish                  *bool              `json:"requiresRepublish,omitempty"`
	SELinuxMount                       *bool              `json:"seLinuxMount,omitempty"`
	NodeAllocatableUpdatePeriodSeconds *int64             `json:"nodeAllocatableUpdatePeriodSeconds,omitempty"`
	ServiceAccountTokenInSecrets       *bool              `json:"serviceAccountTokenInSecrets,omitempty"`
}

type wireTokenRequest struct {
	Audience          string `json:"audience"`
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`
}

func (o *Object) wire() wire {
	w := wire{
		APIVersion: APIVersion,
		Kind:       Kind,
		Metadata:   wireMeta{Name: o.Name, Labels: o.Labels},
		Spec: wireSpec{
			AttachRequired:                     o.AttachRequired,
			PodInfoOnMount:                     o.PodInfoOnMount,
			VolumeLifecycleModes:               o.VolumeLifecycleModes,
			StorageCapacity:                    o.StorageCapacity,
			FSGroupPolicy:                      o.FSGroupPolicy,
			RequiresRepublish:                  o.RequiresRepublish,
			SELinuxMount:                       o.SELinuxMount,
			NodeAllocatableUpdatePeriodSeconds: o.NodeAllocatableUpdatePeriodSeconds,
			ServiceAccountTokenInSecrets:       o.ServiceAccountTokenInSecrets,
		},
	}
	for _, tr := range o.TokenRequests {
		wt := wireTokenRequest{Audience: tr.Audience}
		if tr.ExpirationSeconds != 0 {
			wt.ExpirationSeconds = ptr(tr.ExpirationSeconds)
		}
		w.Spec.TokenRequests = append(w.Spec.TokenRequests, wt)
	}
	return w
}

// JSON returns the object as indented JSON, ready for kubectl apply -f. It
// returns Validate's error for an invalid object.
func (o *Object) JSON() ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(o.wire(), "", "  ")
	if err != nil {
		return nil, invalid("encode JSON: %v", err)
	}
	return append(b, '\n'), nil
}

// YAML returns the object as a YAML document, ready for a deploy manifest or
// kubectl apply -f. It returns Validate's error for an invalid object.
func (o *Object) YAML() ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	w := o.wire()
	var b bytes.Buffer
	line := func(indent int, key, val string) {
		b.WriteString(strings.Repeat("  ", indent))
		b.WriteString(key)
		b.WriteString(":")
		if val != "" {
			b.WriteString(" ")
			b.WriteString(val)
		}
		b.WriteString("\n")
	}
	optBool := func(key string, v *bool) {
		if v != nil {
			line(1, key, strconv.FormatBool(*v))
		}
	}
	line(0, "apiVersion", w.APIVersion)
	line(0, "kind", w.Kind)
	line(0, "metadata", "")
	line(1, "name", scalar(w.Metadata.Name))
	if len(w.Metadata.Labels) > 0 {
		line(1, "labels", "")
		for _, k := range slices.Sorted(maps.Keys(w.Metadata.Labels)) {
			line(2, scalar(k), scalar(w.Metadata.Labels[k]))
		}
	}
	s := w.Spec
	if reflect.ValueOf(s).IsZero() {
		line(0, "spec", "{}") // spec is required; every field left to the API's defaults
		return b.Bytes(), nil
	}
	line(0, "spec", "")
	optBool("attachRequired", s.AttachRequired)
	optBool("podInfoOnMount", s.PodInfoOnMount)
	if len(s.VolumeLifecycleModes) > 0 {
		line(1, "volumeLifecycleModes", "")
		for _, m := range s.VolumeLifecycleModes {
			b.WriteString("    - " + scalar(string(m)) + "\n")
		}
	}
	optBool("storageCapacity", s.StorageCapacity)
	if s.FSGroupPolicy != "" {
		line(1, "fsGroupPolicy", scalar(string(s.FSGroupPolicy)))
	}
	if len(s.TokenRequests) > 0 {
		line(1, "tokenRequests", "")
		for _, tr := range s.TokenRequests {
			b.WriteString("    - audience: " + scalar(tr.Audience) + "\n")
			if tr.ExpirationSeconds != nil {
				b.WriteString("      expirationSeconds: " + strconv.FormatInt(*tr.ExpirationSeconds, 10) + "\n")
			}
		}
	}
	optBool("requiresRepublish", s.RequiresRepublish)
	optBool("seLinuxMount", s.SELinuxMount)
	if p := s.NodeAllocatableUpdatePeriodSeconds; p != nil {
		line(1, "nodeAllocatableUpdatePeriodSeconds", strconv.FormatInt(*p, 10))
	}
	optBool("serviceAccountTokenInSecrets", s.ServiceAccountTokenInSecrets)
	return b.Bytes(), nil
}

// scalar renders s as a plain YAML scalar when no YAML reader could take it
// for anything but that string, and as a JSON (= YAML double-quoted) string
// otherwise.
func scalar(s string) string {
	plain := s != "" && (s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = isAlnum(c) || c == '-' || c == '_' || c == '.' || c == '/'
	}
	if plain {
		switch strings.ToLower(s) {
		case "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf":
			plain = false
		}
	}
	if plain {
		return s
	}
	q, _ := json.Marshal(s) // a string always marshals
	return string(q)
}
