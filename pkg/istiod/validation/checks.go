package validation

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	apinet "istio.io/api/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FieldError is a validation failure of one field.
type FieldError struct {
	// Field is the path ("spec.ports[0].port").
	Field string
	// Value is the offending value, printed with %v.
	Value any
	// Reason says what is wrong.
	Reason string
}

// Error returns "field: value: reason".
func (e *FieldError) Error() string { return fmt.Sprintf("%s: %v: %s", e.Field, e.Value, e.Reason) }

// Level is how strict a check is.
type Level int

const (
	// Istiod is what istiod needs to use an object: the registries skip an
	// object that fails (Accept).
	Istiod Level = iota
	// Webhook is what the validating webhook refuses: every Istiod check
	// and Istio's rules for host names, ports, protocols, labels, regular
	// expressions, subsets and the rest (Validator).
	Webhook
)

// checker collects the problems of one object at one level. Each check
// runs once; the parts only the webhook needs are behind webhook().
type checker struct {
	level Level
	v     *Validator
	ns    string
	errs  []error
}

func (c *checker) add(field string, value any, reason string) {
	c.errs = append(c.errs, &FieldError{Field: field, Value: value, Reason: reason})
}

// webhook reports whether the checks of the Webhook level run.
func (c *checker) webhook() bool { return c.level >= Webhook }

// meta checks an object's name and namespace.
func (c *checker) meta(m metav1.ObjectMeta) {
	if m.Name == "" {
		c.add("metadata.name", `""`, "required")
	} else if msgs := validation.IsDNS1123Subdomain(m.Name); len(msgs) > 0 {
		c.add("metadata.name", m.Name, msgs[0])
	}
	if msgs := validation.IsDNS1123Label(m.Namespace); m.Namespace != "" && len(msgs) > 0 {
		c.add("metadata.namespace", m.Namespace, msgs[0])
	}
}

var labelRE = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)

// host checks a host name: DNS labels, optionally behind a "*." wildcard
// (or "*" alone when wildcard is allowed). It reports whether h is well
// formed.
func (c *checker) host(field, h string, wildcard bool) bool {
	switch {
	case h == "":
		c.add(field, `""`, "empty host")
		return false
	case h == "*":
		if !wildcard {
			c.add(field, h, "a wildcard is not allowed here")
			return false
		}
		return true
	case len(h) > 255:
		c.add(field, h, "host name longer than 255 characters")
		return false
	}
	rest := h
	if strings.HasPrefix(h, "*.") {
		if !wildcard {
			c.add(field, h, "a wildcard is not allowed here")
			return false
		}
		rest = h[2:]
	}
	if strings.HasSuffix(rest, ".") {
		c.add(field, h, "host name must not end with a dot")
		return false
	}
	for _, l := range strings.Split(rest, ".") {
		if len(l) > 63 || !labelRE.MatchString(l) {
			c.add(field, h, fmt.Sprintf("malformed host: label %q is not a DNS-1123 label (letters, digits, '-', at most 63, wildcard only as a leading \"*.\")", l))
			return false
		}
	}
	return true
}

// port checks a required port number.
func (c *checker) port(field string, n int64) {
	if n < 1 || n > 65535 {
		c.add(field, n, "must be in 1..65535")
	}
}

// optPort checks a port number where 0 means unset.
func (c *checker) optPort(field string, n uint32) {
	if n != 0 {
		c.port(field, int64(n))
	}
}

var protocols = []string{"HTTP", "HTTPS", "GRPC", "GRPC-WEB", "HTTP2", "HTTP_PROXY", "MONGO", "MYSQL", "REDIS", "TCP", "TLS", "UDP"}

func (c *checker) protocol(field, p string) {
	if p != "" && !slices.Contains(protocols, strings.ToUpper(p)) {
		c.add(field, p, "unknown protocol (want one of "+strings.Join(protocols, ", ")+")")
	}
}

func (c *checker) labels(field string, m map[string]string) {
	for _, k := range sortedKeys(m) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			c.add(field+"["+k+"]", k, "invalid label key: "+msgs[0])
		}
		if msgs := validation.IsValidLabelValue(m[k]); len(msgs) > 0 {
			c.add(field+"["+k+"]", m[k], "invalid label value: "+msgs[0])
		}
	}
}

func (c *checker) percent(field string, p *apinet.Percent) {
	if p != nil && (p.GetValue() < 0 || p.GetValue() > 100) {
		c.add(field, p.GetValue(), "percentage must be in 0..100")
	}
}

func (c *checker) regex(field, re string) {
	if _, err := regexp.Compile(re); err != nil {
		c.add(field, re, "invalid RE2 regular expression: "+err.Error())
	}
}

// ipOrCIDR checks an address that may be an IP address or a CIDR.
func (c *checker) ipOrCIDR(field, a string) {
	if _, err := netip.ParseAddr(a); err != nil {
		if _, err := netip.ParsePrefix(a); err != nil {
			c.add(field, a, "not an IP address or CIDR")
		}
	}
}

func (c *checker) exportTo(field string, to []string) {
	for i, ns := range to {
		if ns == "." || ns == "*" || ns == "~" {
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			c.add(fmt.Sprintf("%s[%d]", field, i), ns, `want ".", "*" or a namespace name`)
		}
	}
}

func splitHostPort(s string) (string, int, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("no port")
	}
	n, err := strconv.Atoi(s[i+1:])
	return s[:i], n, err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
