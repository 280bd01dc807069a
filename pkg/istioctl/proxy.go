package istioctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
)

// proxyFlags registers what proxy-status and proxy-config share: the root
// flags, -r/--revision and --istiod.
func proxyFlags(fs *pflag.FlagSet, env *Env) *reach {
	r := &reach{env: env, kube: addKubeFlags(fs, env)}
	fs.StringVarP(&r.revision, "revision", "r", "", "control plane revision (selects the istiod pods by istio.io/rev)")
	fs.StringVar(&r.istiod, "istiod", env.Getenv("ISTIOD_DEBUG_ADDR"),
		"istiod's debug address (http://HOST:8080), instead of a port-forward through the API server (env ISTIOD_DEBUG_ADDR)")
	return r
}

func proxyStatusCommand() Command {
	return Command{
		Name:  "proxy-status",
		Short: "sync state of every proxy connected to istiod (CDS, LDS, EDS, RDS, ECDS)",
		Run: func(ctx context.Context, env *Env, args []string) error {
			fs := flagSet("proxy-status", env)
			r := proxyFlags(fs, env)
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			defer r.close()
			istiods, err := r.istiods(ctx)
			if err != nil {
				return err
			}
			var streams []proxyview.ProxyStatus
			for _, ep := range istiods {
				url, err := r.url(ctx, ep)
				if err != nil {
					return err
				}
				s, err := r.status(ctx, &proxyview.Client{Istiod: url})
				if err != nil {
					return fmt.Errorf("istiod %s: %w", ep.Name, err)
				}
				for i := range s {
					s[i].Istiod = ep.Name
				}
				streams = append(streams, s...)
			}
			if r.kube.Namespace != "" {
				streams = proxyview.InNamespace(streams, r.kube.Namespace)
			}
			return proxyview.WriteStatus(env.Stdout, streams, "", "")
		},
	}
}

// splitPod splits POD[.NAMESPACE] at its last dot.
func splitPod(arg string) (pod, ns string) {
	if i := strings.LastIndex(arg, "."); i > 0 {
		return arg[:i], arg[i+1:]
	}
	return arg, ""
}

func proxyConfigCommand() Command {
	return Command{
		Name:  "proxy-config",
		Short: "listeners|clusters|routes|endpoints|secret POD[.NAMESPACE]: what istiod sends a proxy, or its certificates",
		Run: func(ctx context.Context, env *Env, args []string) error {
			fs := flagSet("proxy-config", env)
			r := proxyFlags(fs, env)
			agent := fs.String("agent", "", "secret: the pod's agent status address (http://POD_IP:15020), instead of a port-forward")
			if err := fs.Parse(args); err != nil {
				if errors.Is(err, pflag.ErrHelp) {
					return err
				}
				return &UsageError{err}
			}
			if fs.NArg() != 2 {
				return &UsageError{errors.New("usage: istioctl proxy-config listeners|clusters|routes|endpoints|secret POD[.NAMESPACE]")}
			}
			defer r.close()
			kind, pod := fs.Arg(0), fs.Arg(1)
			name, ns := splitPod(pod)
			if kind == "secret" || kind == "secrets" || kind == "s" {
				if ns == "" {
					var err error
					if ns, err = r.namespace(*agent == ""); err != nil {
						return err
					}
				}
				url, err := r.agent(ctx, *agent, ns, name)
				if err != nil {
					return err
				}
				secrets, err := (&proxyview.Client{}).Secrets(ctx, url)
				if err != nil {
					return fmt.Errorf("agent of %s.%s: %w", name, ns, err)
				}
				return proxyview.WriteSecrets(env.Stdout, secrets)
			}
			if !proxyview.KnownKind(kind) {
				return &UsageError{fmt.Errorf("unknown kind %q: want listeners, clusters, routes, endpoints or secret", kind)}
			}
			if ns == "" {
				var err error
				if ns, err = r.namespace(r.istiod == ""); err != nil {
					return err
				}
			}
			istiods, err := r.istiods(ctx)
			if err != nil {
				return err
			}
			dump, err := r.configDump(ctx, istiods, name+"."+ns)
			if err != nil {
				return err
			}
			return proxyview.WriteConfig(env.Stdout, dump, kind)
		},
	}
}

// configDump asks each istiod in turn for the proxy's config dump; the
// first one it is connected to answers.
func (r *reach) configDump(ctx context.Context, istiods []endpoint, pod string) (*proxyview.Dump, error) {
	var errs []error
	for _, ep := range istiods {
		url, err := r.url(ctx, ep)
		if err != nil {
			return nil, err
		}
		c := &proxyview.Client{Istiod: url}
		d, err := c.ConfigDump(ctx, pod)
		if errors.Is(err, proxyview.ErrUnauthorized) {
			tok, terr := r.token(ctx)
			if terr != nil {
				return nil, fmt.Errorf("istiod %s: %w; no token could be had: %v", ep.Name, err, terr)
			}
			c.Token = tok
			d, err = c.ConfigDump(ctx, pod)
		}
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, proxyview.ErrNotConnected) {
			return nil, fmt.Errorf("istiod %s: %w", ep.Name, err)
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("proxy %q: no istiod", pod)
	}
	return nil, errs[0]
}

func hostOf(url string) string {
	h := strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
	if i := strings.IndexAny(h, ":/"); i > 0 {
		h = h[:i]
	}
	return h
}

// tokenTTL is how long the token istioctl asks for lives (as Istio's: an hour).
const tokenTTL = time.Hour

// status reads syncz; when istiod answers 401 (Istio's istiod to a caller
// off its host), it asks the API server for the token Istio's istioctl
// presents (service account default of istiod's namespace, audience
// istio-ca) and tries once more.
func (r *reach) status(ctx context.Context, c *proxyview.Client) ([]proxyview.ProxyStatus, error) {
	s, err := c.Status(ctx)
	if !errors.Is(err, proxyview.ErrUnauthorized) {
		return s, err
	}
	tok, terr := r.token(ctx)
	if terr != nil {
		return nil, fmt.Errorf("%w; no token could be had: %v", err, terr)
	}
	c.Token = tok
	return c.Status(ctx)
}

// token gets a token for istiod from the cluster.
func (r *reach) token(ctx context.Context) (string, error) {
	cl, err := r.cluster()
	if err != nil {
		return "", err
	}
	return cl.Token(ctx, r.kube.IstioNamespace, "default", []string{cluster.IstioCAAudience}, tokenTTL)
}
