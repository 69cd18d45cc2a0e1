package registration

import (
	"context"
	"time"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// service implements pluginregistration.Registration for a Registrar.
type service struct {
	registerapi.UnimplementedRegistrationServer
	r *Registrar
}

// GetInfo tells kubelet who we are and where the CSI endpoint is.
func (s *service) GetInfo(ctx context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	r := s.r
	r.mu.Lock()
	r.status.InfoRequests++
	r.mu.Unlock()
	r.opts.Logger.Debug("kubelet asked for plugin info", "driver", r.opts.DriverName)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.opts.DriverName,
		Endpoint:          r.opts.Endpoint,
		SupportedVersions: append([]string(nil), r.opts.SupportedVersions...),
	}, nil
}

// NotifyRegistrationStatus records and logs kubelet's verdict.
func (s *service) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r := s.r
	r.mu.Lock()
	r.status.Notified = true
	r.status.Registered = st.GetPluginRegistered()
	r.status.Error = st.GetError()
	r.status.At = time.Now()
	r.mu.Unlock()
	if st.GetPluginRegistered() {
		r.opts.Logger.Info("registered with kubelet", "driver", r.opts.DriverName, "endpoint", r.opts.Endpoint)
	} else {
		r.opts.Logger.Error("kubelet rejected the plugin registration", "driver", r.opts.DriverName, "error", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
