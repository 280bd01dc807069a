package istioctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
	"github.com/skiff-mesh/skiff/pkg/version"
)

func versionCommand() Command {
	return Command{
		Name:  "version",
		Short: "istioctl's version and, with --remote (the default), the control plane's and the proxies'",
		Run: func(ctx context.Context, env *Env, args []string) error {
			fs := flagSet("version", env)
			r := proxyFlags(fs, env)
			remote := fs.Bool("remote", true, "also ask the control plane (use --remote=false for istioctl's alone)")
			short := fs.BoolP("short", "s", true, "versions alone (use --short=false for the build information)")
			output := fs.StringP("output", "o", "", "one of 'yaml' or 'json'")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			if *output != "" && *output != "json" && *output != "yaml" {
				return &UsageError{fmt.Errorf("--output %q: want json or yaml", *output)}
			}
			defer r.close()
			mv := meshVersion{Client: version.Get()}
			if *remote {
				if err := r.remoteVersions(ctx, &mv); err != nil {
					return err
				}
			}
			return mv.write(env.Stdout, *short, *output)
		},
	}
}

// meshVersion is what istioctl version prints, in the shape of Istio's.
type meshVersion struct {
	Client    version.Info    `json:"clientVersion"`
	Mesh      []serverVersion `json:"meshVersion,omitempty"`
	DataPlane []proxyVersion  `json:"dataPlaneVersion,omitempty"`
}

type serverVersion struct {
	Component string       `json:"Component"`
	Revision  string       `json:"Revision,omitempty"`
	Info      version.Info `json:"Info"`
}

type proxyVersion struct {
	ID           string `json:"ID"`
	IstioVersion string `json:"IstioVersion"`
}

// remoteVersions asks each istiod its version (GET /version on its
// monitoring port, as Istio's istioctl does) and the versions its proxies
// reported.
func (r *reach) remoteVersions(ctx context.Context, mv *meshVersion) error {
	istiods, err := r.istiods(ctx)
	if err != nil {
		return err
	}
	for _, ep := range istiods {
		url, err := r.urlOn(ctx, ep, cluster.IstiodMonitoringPort)
		if err != nil {
			return err
		}
		info, err := getVersion(ctx, url+"/version")
		if err != nil {
			return fmt.Errorf("istiod %s: %w", ep.Name, err)
		}
		mv.Mesh = append(mv.Mesh, serverVersion{Component: "istiod", Revision: r.revision, Info: info})
		debug, err := r.url(ctx, ep)
		if err != nil {
			return err
		}
		streams, err := r.status(ctx, &proxyview.Client{Istiod: debug})
		if err != nil {
			return fmt.Errorf("istiod %s: %w", ep.Name, err)
		}
		for _, s := range streams {
			if s.IstioVersion != "" && !slices.ContainsFunc(mv.DataPlane, func(p proxyVersion) bool { return p.ID == s.Proxy }) {
				mv.DataPlane = append(mv.DataPlane, proxyVersion{ID: s.Proxy, IstioVersion: s.IstioVersion})
			}
		}
	}
	return nil
}

func getVersion(ctx context.Context, url string) (version.Info, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return version.Info{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return version.Info{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return version.Info{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var v struct {
		Client version.Info `json:"clientVersion"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil || v.Client.Version == "" {
		return version.Info{}, fmt.Errorf("GET %s: not a version (%v)", url, err)
	}
	return v.Client, nil
}

func (mv meshVersion) write(w io.Writer, short bool, output string) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(mv, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(mv)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	line := func(who string, in version.Info) string {
		if short {
			return fmt.Sprintf("%s version: %s\n", who, in.Version)
		}
		return fmt.Sprintf("%s version: %s\n", who, in.BuildInfo())
	}
	var b strings.Builder
	b.WriteString(line("client", mv.Client))
	if len(mv.Mesh) > 0 {
		var vs []string
		for _, s := range mv.Mesh {
			if !slices.Contains(vs, s.Info.Version) {
				vs = append(vs, s.Info.Version)
			}
		}
		fmt.Fprintf(&b, "control plane version: %s\n", strings.Join(vs, ", "))
	}
	if len(mv.DataPlane) > 0 {
		count := map[string]int{}
		var vs []string
		for _, p := range mv.DataPlane {
			if count[p.IstioVersion]++; count[p.IstioVersion] == 1 {
				vs = append(vs, p.IstioVersion)
			}
		}
		var parts []string
		for _, v := range vs {
			parts = append(parts, fmt.Sprintf("%s (%d proxies)", v, count[v]))
		}
		fmt.Fprintf(&b, "data plane version: %s\n", strings.Join(parts, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
