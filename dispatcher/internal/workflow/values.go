package workflow

import (
	"github.com/rhysd/actionlint"
	"go.yaml.in/yaml/v4"
)

// yamlIndex finds the YAML node behind a position of actionlint's tree. actionlint keeps
// every scalar as text (and lower-cases the keys of matrix objects); the payload of a step
// and the values of a matrix must keep what YAML typed them as (a bool, a number, null)
// and their keys as written, so they are decoded from the node itself. The file is read
// with the same YAML library actionlint uses, so the positions agree.
type yamlIndex struct {
	root  *yaml.Node
	nodes map[nodeKey]*yaml.Node
	// keys: the key of each mapping value, by the value's position.
	keys map[nodeKey]*yaml.Node
}

// nodeKey: a block mapping starts where its first key does, so the kind tells them apart.
type nodeKey struct {
	line, col int
	kind      yaml.Kind
}

func indexYAML(src []byte) *yamlIndex {
	ix := &yamlIndex{nodes: map[nodeKey]*yaml.Node{}, keys: map[nodeKey]*yaml.Node{}}
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil {
		return ix // actionlint could read it, so this is unreachable; values stay text
	}
	ix.root = &doc
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		k := nodeKey{n.Line, n.Column, n.Kind}
		if _, ok := ix.nodes[k]; !ok {
			ix.nodes[k] = n
		}
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 1 {
				ix.keys[nodeKey{c.Line, c.Column, c.Kind}] = n.Content[i-1]
			}
			walk(c)
		}
	}
	walk(&doc)
	return ix
}

// scalar is a step's `with:` value: a template string, or a bool, number (float64) or nil
// when YAML typed the scalar so.
func (ix *yamlIndex) scalar(s *actionlint.String) any {
	if s == nil {
		return nil
	}
	n := ix.nodes[nodeKey{s.Pos.Line, s.Pos.Col, yaml.ScalarNode}]
	if n == nil {
		return s.Value
	}
	return decodeNode(n, s.Value)
}

// raw is a matrix value (scalar, list or object) as YAML typed it.
func (ix *yamlIndex) raw(v actionlint.RawYAMLValue) any {
	if v == nil {
		return nil
	}
	pos := v.Pos()
	n := ix.nodes[nodeKey{pos.Line, pos.Col, yaml.Kind(v.Kind())}]
	if n == nil {
		return v.String()
	}
	return decodeNode(n, v.String())
}

// decodeNode reads a node into JSON's value space: a bool, a number (float64), nil, a
// string (every other scalar, timestamps included, as written), []any or map[string]any.
func decodeNode(n *yaml.Node, fallback string) any {
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias != nil {
			return decodeNode(n.Alias, fallback)
		}
	case yaml.DocumentNode:
		if len(n.Content) == 1 {
			return decodeNode(n.Content[0], fallback)
		}
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			list = append(list, decodeNode(c, c.Value))
		}
		return list
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = decodeNode(n.Content[i+1], n.Content[i+1].Value)
		}
		return m
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return b
			}
		case "!!int", "!!float":
			var f float64
			if n.Decode(&f) == nil {
				return f
			}
		}
		return n.Value
	}
	return fallback
}

// keyOf is the key, as written, of the mapping value s.
func (ix *yamlIndex) keyOf(s *actionlint.String) (string, bool) {
	if k := ix.keys[nodeKey{s.Pos.Line, s.Pos.Col, yaml.ScalarNode}]; k != nil {
		return k.Value, true
	}
	return "", false
}
