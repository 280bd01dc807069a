// Package logtime writes log records' times in UTC, as Istio's logs do
// whatever the node's zone. A process that formats only UTC times never
// loads the zone database: istio-iptables and the CNI plugin, which live
// for one pod's set-up and log a line or two, skip reading /etc/localtime.
package logtime

import "log/slog"

// UTC is a slog ReplaceAttr function that turns the record's time into UTC
// and leaves every other attribute as it is.
func UTC(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	}
	return a
}
