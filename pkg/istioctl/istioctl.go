// Package istioctl is Skiff's istioctl: a table of subcommands, each in its
// own file, run by Main. A new subcommand (proxy-status, proxy-config) is a
// function returning a Command, listed once in commands. Commands that talk
// to istiod or an agent reach it through the Kubernetes API server
// (--kubeconfig, --context, -i; port-forwards to the pods, as Istio's
// istioctl does), or at an address given directly (--istiod, --agent).
package istioctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/istioctl/analyze"
	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
)

// Exit codes of Main.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Env is what a command may touch besides its arguments.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv looks up an environment variable.
	Getenv func(string) string
	// NewForwarder makes the port forwarder for a cluster (nil: client-go's
	// port-forward through the API server; tests record instead).
	NewForwarder func(*cluster.Cluster) cluster.Forwarder
}

// Command is one istioctl subcommand.
type Command struct {
	// Name is the word that selects it ("kube-inject").
	Name string
	// Short is its one-line description for the usage text.
	Short string
	// Run runs it. A *UsageError makes Main print the usage and exit 2.
	Run func(ctx context.Context, env *Env, args []string) error
}

// UsageError is a mistake on the command line.
type UsageError struct{ Err error }

// Error returns the mistake.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// commands is the command table. Add a command here; define it in its own file.
func commands() []Command {
	return []Command{
		kubeInjectCommand(),
		proxyStatusCommand(),
		proxyConfigCommand(),
		analyzeCommand(),
		versionCommand(),
	}
}

func analyzeCommand() Command {
	return Command{
		Name:  "analyze",
		Short: "analyze Istio configuration (files, the cluster) and print validation messages",
		Run: func(ctx context.Context, env *Env, args []string) error {
			err := analyze.Run(ctx, &analyze.Env{Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv}, args)
			var ue *analyze.UsageError
			if errors.As(err, &ue) {
				return &UsageError{ue.Err}
			}
			return err
		},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: istioctl COMMAND [flags]\n\ncommands:")
	cmds := commands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-14s %s\n", c.Name, c.Short)
	}
	fmt.Fprintln(w, "\nRun 'istioctl COMMAND --help' for a command's flags.")
}

// Main runs istioctl with args (without the program name) and returns the
// exit code.
func Main(ctx context.Context, args []string, env *Env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.Stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	name, rest, err := hoistRootFlags(args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "istioctl: %v\n", err)
		usage(env.Stderr)
		return ExitUsage
	}
	for _, c := range commands() {
		if c.Name != name {
			continue
		}
		err := c.Run(ctx, env, rest)
		var ue *UsageError
		var ec interface{ ExitCode() int }
		switch {
		case err == nil:
			return ExitOK
		case errors.Is(err, pflag.ErrHelp):
			return ExitOK
		case errors.As(err, &ec):
			fmt.Fprintf(env.Stderr, "istioctl %s: %v\n", c.Name, err)
			return ec.ExitCode()
		case errors.As(err, &ue):
			fmt.Fprintf(env.Stderr, "istioctl %s: %v\n", c.Name, err)
			return ExitUsage
		default:
			fmt.Fprintf(env.Stderr, "istioctl %s: %v\n", c.Name, err)
			return ExitError
		}
	}
	fmt.Fprintf(env.Stderr, "istioctl: unknown command %q\n", name)
	usage(env.Stderr)
	return ExitUsage
}

// flagSet makes a command's flag set that reports errors as UsageErrors.
func flagSet(name string, env *Env) *pflag.FlagSet {
	fs := pflag.NewFlagSet("istioctl "+name, pflag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.SortFlags = false
	return fs
}

func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return &UsageError{err}
	}
	if fs.NArg() > 0 {
		return &UsageError{fmt.Errorf("unexpected argument %q", strings.Join(fs.Args(), " "))}
	}
	return nil
}
