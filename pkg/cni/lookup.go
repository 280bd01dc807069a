package cni

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// LookupBinary is the plugin's helper, installed beside it: it reads a pod
// from the API server when the node agent's cache cannot answer. It is a
// binary of its own so that the plugin, started for every pod, links no
// HTTP, TLS or YAML code (about 1 ms of start-up per ADD).
const LookupBinary = "istio-cni-lookup"

// ExitKubeconfig is the helper's exit code when its kubeconfig cannot be
// used; any other failure exits 1.
const ExitKubeconfig = 2

// Lookup is what the plugin asks its helper: which pod, with which
// credentials, and how long to keep trying while the API server does not
// know the pod yet.
type Lookup struct {
	Kubeconfig string
	Namespace  string
	Name       string
	Tries      int
	Interval   time.Duration
}

// RequestTimeout bounds one GET of the pod from the API server.
const RequestTimeout = 5 * time.Second

// Timeout bounds the whole lookup: every try may take RequestTimeout, and
// the tries are Interval apart.
func (l Lookup) Timeout() time.Duration {
	return time.Duration(l.Tries) * (RequestTimeout + l.Interval)
}

// Args is the helper's command line for l.
func (l Lookup) Args() []string {
	return []string{"--kubeconfig", l.Kubeconfig, "--tries", strconv.Itoa(l.Tries), "--interval", l.Interval.String(), "--", l.Namespace, l.Name}
}

// ParseLookup reads the helper's command line (Args).
func ParseLookup(args []string) (Lookup, error) {
	var l Lookup
	fs := flag.NewFlagSet(LookupBinary, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&l.Kubeconfig, "kubeconfig", "", "the kubeconfig to read the pod with")
	fs.IntVar(&l.Tries, "tries", 1, "tries while the API server does not know the pod")
	fs.DurationVar(&l.Interval, "interval", time.Second, "time between tries")
	if err := fs.Parse(args); err != nil {
		return l, err
	}
	switch {
	case fs.NArg() != 2 || fs.Arg(0) == "" || fs.Arg(1) == "":
		return l, fmt.Errorf("want NAMESPACE NAME after the flags, got %q", fs.Args())
	case l.Kubeconfig == "":
		return l, errors.New("--kubeconfig: not set")
	case l.Tries < 1:
		return l, fmt.Errorf("--tries: %d is below 1", l.Tries)
	case l.Interval < 0:
		return l, fmt.Errorf("--interval: %s is negative", l.Interval)
	}
	l.Namespace, l.Name = fs.Arg(0), fs.Arg(1)
	return l, nil
}

// KubeconfigError is a lookup that failed on its kubeconfig, not on the
// pod: the helper exits ExitKubeconfig.
type KubeconfigError struct{ Err error }

func (e *KubeconfigError) Error() string { return e.Err.Error() }
func (e *KubeconfigError) Unwrap() error { return e.Err }

// runHelper runs the helper beside the plugin's own binary and decodes the
// pod it prints. A kubeconfig it cannot use comes back as a
// *KubeconfigError.
func runHelper(ctx context.Context, l Lookup) (*Pod, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", LookupBinary, err)
	}
	path := filepath.Join(filepath.Dir(self), LookupBinary)
	cmd := exec.CommandContext(ctx, path, l.Args()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == ExitKubeconfig:
		return nil, &KubeconfigError{Err: errors.New(msg)}
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: no answer in time: %w (%s)", path, ctx.Err(), msg)
	case errors.As(err, &exit) && msg != "":
		return nil, errors.New(msg)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pod, err := decodePod(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: decode its pod: %w", path, err)
	}
	return pod, nil
}
