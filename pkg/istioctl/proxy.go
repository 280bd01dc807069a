package istioctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
)

// istiodFlag registers --istiod: istiod's debug address.
func istiodFlag(fs *pflag.FlagSet, env *Env) *string {
	def := "http://localhost:8080"
	if v := env.Getenv("ISTIOD_DEBUG_ADDR"); v != "" {
		def = v
	}
	return fs.String("istiod", def, "istiod's debug address (env ISTIOD_DEBUG_ADDR)")
}

func proxyStatusCommand() Command {
	return Command{
		Name:  "proxy-status",
		Short: "sync state of every proxy connected to istiod (CDS, LDS, EDS, RDS, ECDS)",
		Run: func(ctx context.Context, env *Env, args []string) error {
			fs := pflag.NewFlagSet("proxy-status", pflag.ContinueOnError)
			fs.SetOutput(env.Stderr)
			istiod := istiodFlag(fs, env)
			if err := fs.Parse(args); err != nil {
				return &UsageError{err}
			}
			c := &proxyview.Client{Istiod: *istiod}
			streams, err := c.Status(ctx)
			if err != nil {
				return err
			}
			return proxyview.WriteStatus(env.Stdout, streams, hostOf(*istiod), "skiff")
		},
	}
}

func proxyConfigCommand() Command {
	return Command{
		Name:  "proxy-config",
		Short: "listeners|clusters|routes|endpoints|secret POD[.NAMESPACE]: what istiod sends a proxy, or its certificates",
		Run: func(ctx context.Context, env *Env, args []string) error {
			fs := pflag.NewFlagSet("proxy-config", pflag.ContinueOnError)
			fs.SetOutput(env.Stderr)
			istiod := istiodFlag(fs, env)
			agent := fs.String("agent", "", "secret: the pod's agent status address (http://POD_IP:15020)")
			ns := fs.StringP("namespace", "n", "default", "the pod's namespace")
			if err := fs.Parse(args); err != nil {
				return &UsageError{err}
			}
			if fs.NArg() != 2 {
				return &UsageError{errors.New("usage: istioctl proxy-config listeners|clusters|routes|endpoints|secret POD[.NAMESPACE]")}
			}
			kind, pod := fs.Arg(0), fs.Arg(1)
			if !strings.Contains(pod, ".") {
				pod += "." + *ns
			}
			c := &proxyview.Client{Istiod: *istiod}
			if kind == "secret" || kind == "secrets" {
				if *agent == "" {
					return &UsageError{errors.New("proxy-config secret needs --agent http://POD_IP:15020")}
				}
				secrets, err := c.Secrets(ctx, *agent)
				if err != nil {
					return err
				}
				return proxyview.WriteSecrets(env.Stdout, secrets)
			}
			dump, err := c.ConfigDump(ctx, pod)
			if err != nil {
				return err
			}
			if err := proxyview.WriteConfig(env.Stdout, dump, kind); err != nil {
				return &UsageError{err}
			}
			return nil
		},
	}
}

func hostOf(url string) string {
	h := strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
	if i := strings.IndexAny(h, ":/"); i > 0 {
		h = h[:i]
	}
	return fmt.Sprint(h)
}
