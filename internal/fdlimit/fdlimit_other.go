//go:build !linux

package fdlimit

// osLimits is empty where Berth does not manage the limit.
var osLimits limits
