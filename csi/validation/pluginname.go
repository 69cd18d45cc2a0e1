package validation

// PluginNameRule describes the spec's rule for plugin names, for error
// messages.
const PluginNameRule = "1-63 characters, alphanumeric at both ends, only alphanumerics, '-' and '.' between"

// ValidPluginName reports whether name obeys the CSI spec's rule for the
// name GetPluginInfo returns (PluginNameRule; domain-name notation such as
// "block.vendor.example" is recommended). Kubernetes uses the same string
// as the CSIDriver object's name and in kubelet plugin registration, which
// check it with this function too.
func ValidPluginName(name string) bool {
	if len(name) == 0 || len(name) > 63 || !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
