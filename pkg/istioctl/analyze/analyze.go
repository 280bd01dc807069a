// Package analyze is istioctl analyze: it reads Istio configuration from
// files and, unless --use-kube=false, from the cluster, runs istiod's
// analyzers (pkg/istiod/analysis) on it and prints their messages in
// Istio's form ("Error [IST0101] (VirtualService default/reviews
// bookinfo.yaml:12) Referenced host not found: \"ratings\""). The exit
// code is Istio's: 79 when a message is at or above --failure-threshold,
// 65 when a file could not be parsed.
package analyze

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
)

// Exit codes, as Istio's istioctl (sysexits-style).
const (
	// ExitIssues: an analyzer found a message at or above the failure
	// threshold.
	ExitIssues = 79
	// ExitParse: a file could not be parsed.
	ExitParse = 65
)

// Env is what the command may touch besides its arguments.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv looks up KUBECONFIG and HOME.
	Getenv func(string) string
}

// ExitError is a result that sets the exit code.
type ExitError struct {
	Code int
	Err  error
}

// Error returns the reason.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the reason.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the exit code.
func (e *ExitError) ExitCode() int { return e.Code }

// UsageError is a mistake on the command line.
type UsageError struct{ Err error }

// Error returns the mistake.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the mistake.
func (e *UsageError) Unwrap() error { return e.Err }

// levelFlag is a pflag.Value for a threshold.
type levelFlag struct{ l *analysis.Level }

func (f levelFlag) String() string { return f.l.String() }
func (f levelFlag) Type() string   { return "Level" }
func (f levelFlag) Set(s string) error {
	l, err := analysis.ParseLevel(s)
	if err != nil {
		return err
	}
	*f.l = l
	return nil
}

// options are the parsed flags.
type options struct {
	files                []string
	useKube, all, ignore bool
	list                 bool
	kubeconfig, context  string
	namespace            string
	failure, output      analysis.Level
	format               string
	suppress             []string
}

func parse(args []string, env *Env) (*options, error) {
	o := &options{failure: analysis.Error, output: analysis.Info}
	fs := pflag.NewFlagSet("istioctl analyze", pflag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.SortFlags = false
	fs.BoolVarP(&o.list, "list-analyzers", "L", false, "list the message codes the analyzers report, and exit")
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "file or directory to analyze (repeatable; files may also be given as arguments; - is stdin)")
	fs.BoolP("recursive", "R", true, "walk directories recursively (always on, as in Istio 1.31)")
	fs.BoolVarP(&o.useKube, "use-kube", "k", true, "analyze the live cluster too (--use-kube=false: files only)")
	fs.BoolVarP(&o.all, "all-namespaces", "A", false, "analyze all namespaces")
	fs.StringVarP(&o.kubeconfig, "kubeconfig", "c", "", "Kubernetes configuration file (env KUBECONFIG)")
	fs.StringVar(&o.context, "context", "", "Kubernetes configuration context")
	fs.StringP("istioNamespace", "i", "istio-system", "Istio system namespace")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "namespace to analyze, and of file objects without one (default: the context's, else default)")
	fs.Var(levelFlag{&o.failure}, "failure-threshold", "the level of message at which to exit non-zero: Info, Warning or Error")
	fs.Var(levelFlag{&o.output}, "output-threshold", "the level of message at which to print: Info, Warning or Error")
	fs.StringVarP(&o.format, "output", "o", "log", "output format: log, json or yaml")
	fs.StringArrayVarP(&o.suppress, "suppress", "S", nil, `suppress a code on a resource: CODE=Kind name.namespace ("IST0101=VirtualService reviews.default"; * matches any text)`)
	fs.BoolVar(&o.ignore, "ignore-unknown", false, "do not fail on files that cannot be parsed")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, &UsageError{err}
	}
	o.files = append(o.files, fs.Args()...)
	if !slices.Contains([]string{"log", "json", "yaml"}, o.format) {
		return nil, &UsageError{fmt.Errorf("--output %q: want log, json or yaml", o.format)}
	}
	for _, s := range o.suppress {
		if code, res, ok := strings.Cut(s, "="); !ok || code == "" || res == "" {
			return nil, &UsageError{fmt.Errorf("--suppress %q: want CODE=Kind name.namespace", s)}
		}
	}
	return o, nil
}

// Run runs istioctl analyze with args (after the command name).
func Run(ctx context.Context, env *Env, args []string) error {
	o, err := parse(args, env)
	if err != nil {
		return err
	}
	if o.list {
		for _, t := range analysis.Types() {
			fmt.Fprintf(env.Stdout, "* %s %s (%s)\n", t.Code, t.Name, t.Level)
		}
		return nil
	}
	files := &analysis.Set{}
	var fileNames []string
	var parseErrs []error
	ns := o.namespace
	var c *cluster.Cluster
	if o.useKube {
		if c, err = cluster.Load(cluster.Options{Kubeconfig: o.kubeconfig, Context: o.context, Getenv: env.Getenv}); err != nil {
			return err
		}
		if ns == "" {
			ns = c.Namespace
		}
	}
	if ns == "" {
		ns = "default"
	}
	if c != nil {
		// As Istio's: a namespace that does not exist is said, not analyzed.
		if err := c.Clients.Core.Get().Resource("namespaces").Name(ns).Do(ctx).Error(); apierrors.IsNotFound(err) {
			fmt.Fprintf(env.Stderr, "namespace %q not found\n", ns)
			return nil
		} else if err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	for _, f := range o.files {
		names, errs, err := readPath(env, files, f, ns)
		if err != nil {
			return err
		}
		fileNames = append(fileNames, names...)
		parseErrs = append(parseErrs, errs...)
	}
	set := files
	if c != nil {
		if set, err = listCluster(ctx, c); err != nil {
			return err
		}
		set.Merge(files)
	}
	if len(parseErrs) > 0 {
		fmt.Fprintf(env.Stderr, "Error(s) adding files: %v\n", errors.Join(parseErrs...))
	}
	target := "namespace: " + ns
	if o.all {
		target = "all namespaces"
	}
	var msgs []analysis.Message
	for _, m := range analysis.AnalyzeSet(set) {
		if (o.all || m.Resource.Namespace == ns) && !suppressed(o.suppress, m) {
			msgs = append(msgs, m)
		}
	}
	var shown []analysis.Message
	for _, m := range msgs {
		if m.Level >= o.output {
			shown = append(shown, m)
		}
	}
	if err := print(env.Stdout, o.format, shown); err != nil {
		return err
	}
	if len(shown) == 0 {
		switch {
		case len(parseErrs) > 0:
			fmt.Fprintf(env.Stderr, "No validation issues found when analyzing %s (but %d %s could not be parsed).\n", target, len(parseErrs), plural(len(parseErrs), "file", "files"))
		case len(fileNames) > 1:
			fmt.Fprintf(env.Stderr, "\u2714 No validation issues found when analyzing:\n  - %s\n", strings.Join(fileNames, "\n  - "))
		case len(fileNames) == 1:
			fmt.Fprintf(env.Stderr, "\u2714 No validation issues found when analyzing %s.\n", fileNames[0])
		default:
			fmt.Fprintf(env.Stderr, "\u2714 No validation issues found when analyzing %s.\n", target)
		}
	}
	if o.format != "log" {
		return nil
	}
	for _, m := range msgs {
		if m.Level >= o.failure {
			return &ExitError{Code: ExitIssues, Err: fmt.Errorf("Analyzers found issues when analyzing %s.\nSee %s for more information about causes and resolutions", target, analysis.DocsURL)}
		}
	}
	if len(parseErrs) > 0 && !o.ignore {
		return &ExitError{Code: ExitParse, Err: errors.New("Some files couldn't be parsed")}
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// suppressed reports whether a --suppress value matches m: its code and
// "Kind name.namespace", where * matches any text.
func suppressed(rules []string, m analysis.Message) bool {
	res := fmt.Sprintf("%s %s.%s", m.Resource.Kind, m.Resource.Name, m.Resource.Namespace)
	for _, r := range rules {
		code, pat, _ := strings.Cut(r, "=")
		if code == m.Type.Code && match(pat, res) {
			return true
		}
	}
	return false
}

func match(pat, s string) bool {
	ok, err := filepath.Match(strings.ReplaceAll(pat, "/", "\x00"), strings.ReplaceAll(s, "/", "\x00"))
	return err == nil && ok
}
