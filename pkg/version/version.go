// Package version is the build's version and the "version" command of
// Istio's binaries (pilot-agent version, pilot-discovery version), with
// their flags and output forms.
package version

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// Version is Skiff's version, set at build time with
// -ldflags "-X github.com/skiff-mesh/skiff/pkg/version.Version=...".
var Version = "skiff-dev"

// Info is what the command prints, in the shape of Istio's BuildInfo.
type Info struct {
	Version       string `json:"version"`
	GitRevision   string `json:"revision"`
	GolangVersion string `json:"golang_version"`
	BuildStatus   string `json:"status"`
	GitTag        string `json:"tag"`
}

// BuildInfo is in written as Istio's version command writes it in full.
func (in Info) BuildInfo() string {
	return fmt.Sprintf("version.BuildInfo{Version:%q, GitRevision:%q, GolangVersion:%q, BuildStatus:%q, GitTag:%q}",
		in.Version, in.GitRevision, in.GolangVersion, in.BuildStatus, in.GitTag)
}

// Get is this binary's Info: Version, and the revision Go recorded.
func Get() Info {
	in := Info{Version: Version, GolangVersion: runtime.Version(), BuildStatus: "Clean", GitTag: Version}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && len(s.Value) >= 12:
				in.GitRevision = s.Value[:12]
			case s.Key == "vcs.modified" && s.Value == "true":
				in.BuildStatus = "Modified"
			}
		}
	}
	if in.GitRevision == "" {
		in.GitRevision = "unknown"
	}
	return in
}

// Command runs "version" with args as Istio's does: the full BuildInfo,
// or -s/--short for the version alone, or -o/--output json or yaml. It
// returns the exit code.
func Command(name string, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(name+" version", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.BoolP("short", "s", false, "the version alone")
	output := fs.StringP("output", "o", "", "one of 'yaml' or 'json'")
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		fmt.Fprintf(stderr, "%s version: %v\n", name, err)
		return 2
	}
	in := Get()
	switch *output {
	case "":
		if *short {
			fmt.Fprintf(stdout, "client version: %s\n", in.Version)
			return 0
		}
		fmt.Fprintf(stdout, "client version: %s\n", in.BuildInfo())
	case "json":
		b, _ := json.MarshalIndent(map[string]Info{"clientVersion": in}, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	case "yaml":
		fmt.Fprintf(stdout, "clientVersion:\n  golang_version: %s\n  revision: %s\n  status: %s\n  tag: %s\n  version: %s\n\n",
			in.GolangVersion, in.GitRevision, in.BuildStatus, in.GitTag, in.Version)
	default:
		fmt.Fprintf(stderr, "%s version: --output %q: want json or yaml\n", name, *output)
		return 2
	}
	return 0
}
