package analysis

import (
	"fmt"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// source is where an object was read from a YAML file: messages about a
// field point at the field's line, as Istio's do.
type source struct {
	file  string
	first int          // line of the document's first line in the file
	root  *yamlv3.Node // the document's top mapping
}

// line returns the file line of field ("spec.http[0].route[0].destination.host"),
// or of the deepest part of it present; 0 if none is.
func (src *source) line(field string) int {
	n, line := src.root, 0
walk:
	for seg := range strings.SplitSeq(field, ".") {
		name, rest, _ := strings.Cut(seg, "[")
		k, v := lookup(n, name)
		if k == nil {
			break
		}
		line, n = k.Line, v
		for rest != "" { // "0]" or "0][1]"
			idx, after, _ := strings.Cut(rest, "]")
			rest = strings.TrimPrefix(after, "[")
			i, err := strconv.Atoi(idx)
			if err != nil || n.Kind != yamlv3.SequenceNode || i >= len(n.Content) {
				break walk
			}
			n = n.Content[i]
			line = n.Line
		}
	}
	if line == 0 {
		return 0
	}
	return src.first + line - 1
}

// lookup returns the key and value nodes of key in mapping m, or nils.
func lookup(m *yamlv3.Node, key string) (*yamlv3.Node, *yamlv3.Node) {
	if m == nil || m.Kind != yamlv3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// remember records where k was read (file, first line, parsed document).
func (s *Set) remember(k model.Key, file string, first int, raw []byte) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil || doc.Kind != yamlv3.DocumentNode || len(doc.Content) == 0 {
		return
	}
	if s.sources == nil {
		s.sources = map[model.Key]*source{}
	}
	s.sources[k] = &source{file: file, first: first, root: doc.Content[0]}
}

// originOf returns where a message points: the field's line when the
// object came from a file, else the object's origin.
func (s *Set) originOf(m Message) string {
	if src, ok := s.sources[m.Resource]; ok && m.Field != "" {
		if l := src.line(m.Field); l > 0 {
			return fmt.Sprintf("%s:%d", src.file, l)
		}
	}
	return s.Origins[m.Resource]
}
