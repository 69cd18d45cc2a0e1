package metrics

import "time"

// DefaultBuckets are the histogram buckets, in seconds, of
// csi_plugin_operations_seconds: the ones csi-lib-utils uses, so panels and
// alerts built on the sidecars' histograms read ours the same way.
var DefaultBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600}

// UnknownDriver is the driver_name label value used when
// ServerOptions.DriverName is empty, as in csi-lib-utils.
const UnknownDriver = "unknown-driver"

// ServerOptions configures NewServerMetrics. The zero value is usable.
type ServerOptions struct {
	// DriverName is the driver_name label of every series (the CSI driver
	// name, e.g. "block.vendor.example"). Empty means UnknownDriver.
	DriverName string

	// LockStats, when set, is called on every scrape and reports how many
	// volume locks are held and for how long the oldest of them has been
	// held. It must be cheap and safe for concurrent use. When nil the lock
	// gauges are not exported.
	LockStats func() (held int, oldest time.Duration)

	// Buckets overrides DefaultBuckets for the operations histogram.
	Buckets []float64
}

func (o ServerOptions) driverName() string {
	if o.DriverName == "" {
		return UnknownDriver
	}
	return o.DriverName
}
