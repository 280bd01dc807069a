package xdswire

import "fmt"

// The values of grpc.health.v1.HealthCheckResponse.ServingStatus.
const (
	HealthUnknown        int32 = 0
	HealthServing        int32 = 1
	HealthNotServing     int32 = 2
	HealthServiceUnknown int32 = 3
)

// HealthStatusName returns the name of the serving status s, such as
// "SERVING", or "ServingStatus(7)" for a value it does not know.
func HealthStatusName(s int32) string {
	switch s {
	case HealthUnknown:
		return "UNKNOWN"
	case HealthServing:
		return "SERVING"
	case HealthNotServing:
		return "NOT_SERVING"
	case HealthServiceUnknown:
		return "SERVICE_UNKNOWN"
	}
	return fmt.Sprintf("ServingStatus(%d)", s)
}

// HealthCheckRequest returns an encoded grpc.health.v1.HealthCheckRequest
// for service ("" asks about the server as a whole).
func HealthCheckRequest(service string) []byte {
	return appendString(nil, 1, service)
}

// DecodeHealthCheckResponse decodes an encoded
// grpc.health.v1.HealthCheckResponse and returns its status (field 1), one of
// the Health constants unless the server is newer than this package.
func DecodeHealthCheckResponse(b []byte) (status int32, err error) {
	const msg = "HealthCheckResponse"
	err = rangeFields(msg, b, func(f *field) error {
		if f.num != 1 {
			return nil
		}
		x, err := f.varint(msg, "status")
		status = int32(x)
		return err
	})
	if err != nil {
		return 0, err
	}
	return status, nil
}
