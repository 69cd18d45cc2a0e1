package keys

import (
	"encoding/json"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PodInfo is the pod information kubelet adds to NodePublishVolume's volume
// context when the CSIDriver object sets podInfoOnMount.
type PodInfo struct {
	// Name is the pod's name.
	Name string
	// Namespace is the pod's namespace.
	Namespace string
	// UID is the pod's UID.
	UID string
	// ServiceAccountName is the pod's service account.
	ServiceAccountName string
	// Ephemeral is true for a CSI ephemeral inline volume.
	Ephemeral bool
}

// Pod reads the pod information from a NodePublishVolume volume context. ok
// is false when kubelet added none (podInfoOnMount is off, or the caller is
// not kubelet).
func Pod(volumeContext map[string]string) (info PodInfo, ok bool) {
	info = PodInfo{
		Name:               volumeContext[PodName],
		Namespace:          volumeContext[PodNamespace],
		UID:                volumeContext[PodUID],
		ServiceAccountName: volumeContext[ServiceAccountName],
		Ephemeral:          volumeContext[Ephemeral] == "true",
	}
	return info, info != PodInfo{}
}

// IsEphemeral reports whether a NodePublishVolume volume context describes a
// CSI ephemeral inline volume. Kubelet only says so when podInfoOnMount is
// set, so a driver that supports both lifecycle modes must set it.
func IsEphemeral(volumeContext map[string]string) bool {
	return volumeContext[Ephemeral] == "true"
}

// ServiceAccountToken is one service-account token kubelet passes for an
// audience listed in the CSIDriver object's tokenRequests. Its fmt and
// log/slog forms redact Value.
type ServiceAccountToken struct {
	// Value is the token itself: a secret.
	Value string
	// Expiration is when the token expires (zero if kubelet did not say).
	Expiration time.Time
}

// String redacts the token so it cannot reach a log by accident.
func (t ServiceAccountToken) String() string {
	return "ServiceAccountToken{Value:[REDACTED], Expiration:" + t.Expiration.Format(time.RFC3339) + "}"
}

// GoString redacts the token for the %#v verb too.
func (t ServiceAccountToken) GoString() string { return t.String() }

// LogValue redacts the token in log/slog output.
func (t ServiceAccountToken) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("value", "[REDACTED]"),
		slog.Time("expiration", t.Expiration),
	)
}

// tokenJSON is kubelet's wire form of one token (authentication/v1
// TokenRequestStatus: token, expirationTimestamp as RFC 3339).
type tokenJSON struct {
	Token               string    `json:"token"`
	ExpirationTimestamp time.Time `json:"expirationTimestamp"`
}

// Tokens parses the tokens kubelet passes to NodePublishVolume,
// keyed by audience. It reads secrets first (CSIDriver
// serviceAccountTokenInSecrets) and falls back to volumeContext. It returns
// an empty map and no error when neither holds tokens, and an InvalidArgument
// error, which never quotes the input, when the value is malformed.
func Tokens(volumeContext, secrets map[string]string) (map[string]ServiceAccountToken, error) {
	raw, ok := secrets[ServiceAccountTokens]
	if !ok {
		raw, ok = volumeContext[ServiceAccountTokens]
	}
	out := map[string]ServiceAccountToken{}
	if !ok || raw == "" {
		return out, nil
	}
	var wire map[string]tokenJSON
	if err := json.Unmarshal([]byte(raw), &wire); err != nil {
		// The JSON error may quote part of the input, i.e. a token: drop it.
		return nil, status.Errorf(codes.InvalidArgument,
			"%s: got %d bytes that are not a JSON map of audience to {token, expirationTimestamp}, want the form kubelet writes",
			ServiceAccountTokens, len(raw))
	}
	for aud, t := range wire {
		out[aud] = ServiceAccountToken{Value: t.Token, Expiration: t.ExpirationTimestamp}
	}
	return out, nil
}
