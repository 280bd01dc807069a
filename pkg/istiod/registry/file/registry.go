package file

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry"
)

// Registry reads a directory tree of YAML files and watches it.
type Registry struct {
	dir string
	log *slog.Logger

	mu       sync.Mutex
	files    map[string]*parsed // by path
	paths    []string           // the keys of files, sorted (setFile, dropFile)
	inputs   *model.Inputs
	problems []error
	synced   bool
}

var _ registry.Registry = (*Registry)(nil)

type parsed struct {
	sum  [sha256.Size]byte // of the file's bytes: what a later read is compared with
	objs []any
	errs []error
}

// New returns a registry for dir; call Load or Run to read it.
func New(dir string, log *slog.Logger) *Registry {
	return &Registry{dir: dir, log: log.With("component", "file-registry"), files: map[string]*parsed{}, inputs: &model.Inputs{}}
}

// isConfigFile reports whether a path is read (YAML or JSON, not hidden).
func isConfigFile(p string) bool {
	base := filepath.Base(p)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch filepath.Ext(base) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Load reads every file under the directory.
func (r *Registry) Load() error {
	if st, err := os.Stat(r.dir); err != nil {
		return fmt.Errorf("config dir: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("config dir %s: not a directory", r.dir)
	}
	var paths []string
	err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isConfigFile(p) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk config dir: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files, r.paths = map[string]*parsed{}, nil
	for _, p := range paths {
		r.readLocked(p)
	}
	r.rebuildLocked()
	r.synced = true
	return nil
}

// readLocked (re)parses one file; it reports whether anything changed.
func (r *Registry) readLocked(p string) bool {
	data, err := os.ReadFile(p)
	if err != nil {
		if _, had := r.files[p]; had {
			r.dropFile(p)
			return true
		}
		return false
	}
	sum := sha256.Sum256(data)
	if old := r.files[p]; old != nil && old.sum == sum {
		return false
	}
	objs, errs := Parse(p, data)
	for _, e := range errs {
		r.log.Warn("skipping invalid config", "err", e)
	}
	r.setFile(p, &parsed{sum: sum, objs: objs, errs: errs})
	return true
}

// setFile records what file p holds, keeping paths sorted.
func (r *Registry) setFile(p string, f *parsed) {
	if _, had := r.files[p]; !had {
		i, _ := slices.BinarySearch(r.paths, p)
		r.paths = slices.Insert(r.paths, i, p)
	}
	r.files[p] = f
}

// dropFile forgets file p.
func (r *Registry) dropFile(p string) {
	delete(r.files, p)
	if i, ok := slices.BinarySearch(r.paths, p); ok {
		r.paths = slices.Delete(r.paths, i, i+1)
	}
}

// rebuildLocked assembles Inputs from all files, in path order; a second
// object with the same kind and name is reported and skipped.
func (r *Registry) rebuildLocked() {
	in := &model.Inputs{}
	var problems []error
	n := 0
	for _, f := range r.files {
		n += len(f.objs)
	}
	// Sized at once: growing it was most of the rebuild after a change.
	seen := make(map[model.Key]string, n)
	for _, p := range r.paths {
		f := r.files[p]
		problems = append(problems, f.errs...)
		for _, o := range f.objs {
			m := o.(metav1.Object)
			k := model.Key{Kind: kindOf(o), Namespace: m.GetNamespace(), Name: m.GetName()}
			if first, dup := seen[k]; dup {
				problems = append(problems, &ObjectError{File: p, Kind: string(k.Kind), Namespace: k.Namespace, Name: k.Name,
					Err: fmt.Errorf("duplicate: already defined in %s", first)})
				continue
			}
			seen[k] = p
			add(in, o)
		}
	}
	r.inputs, r.problems = in, problems
}

func kindOf(o any) model.Kind {
	switch o.(type) {
	case *corev1.Service:
		return model.KindService
	case *discoveryv1.EndpointSlice:
		return model.KindEndpointSlice
	case *corev1.Pod:
		return model.KindPod
	case *networking.ServiceEntry:
		return model.KindServiceEntry
	case *networking.WorkloadEntry:
		return model.KindWorkloadEntry
	case *networking.VirtualService:
		return model.KindVirtualService
	case *networking.DestinationRule:
		return model.KindDestinationRule
	case *networking.Sidecar:
		return model.KindSidecar
	case *security.PeerAuthentication:
		return model.KindPeerAuthentication
	case *security.AuthorizationPolicy:
		return model.KindAuthorizationPolicy
	case *security.RequestAuthentication:
		return model.KindRequestAuthentication
	}
	return ""
}

func add(in *model.Inputs, o any) {
	switch v := o.(type) {
	case *corev1.Service:
		in.Services = append(in.Services, v)
	case *discoveryv1.EndpointSlice:
		in.EndpointSlices = append(in.EndpointSlices, v)
	case *corev1.Pod:
		in.Pods = append(in.Pods, model.PodOf(v))
	case *networking.ServiceEntry:
		in.ServiceEntries = append(in.ServiceEntries, v)
	case *networking.WorkloadEntry:
		in.WorkloadEntries = append(in.WorkloadEntries, v)
	case *networking.VirtualService:
		in.VirtualServices = append(in.VirtualServices, v)
	case *networking.DestinationRule:
		in.DestinationRules = append(in.DestinationRules, v)
	case *networking.Sidecar:
		in.Sidecars = append(in.Sidecars, v)
	case *security.PeerAuthentication:
		in.PeerAuthentications = append(in.PeerAuthentications, v)
	case *security.AuthorizationPolicy:
		in.AuthorizationPolicies = append(in.AuthorizationPolicies, v)
	case *security.RequestAuthentication:
		in.RequestAuthentications = append(in.RequestAuthentications, v)
	}
}

// Inputs returns the current objects.
func (r *Registry) Inputs() *model.Inputs {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inputs
}

// Problems returns the skipped documents and duplicates.
func (r *Registry) Problems() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.problems)
}

// Synced reports whether the directory has been read once.
func (r *Registry) Synced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}
