package csidriver_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// parseYAML is a deliberately small YAML reader for the block style the
// package emits (maps, lists of scalars, lists of maps, plain and
// double-quoted scalars). It lets the tests read the output back without
// adding a YAML library to the shared go.mod, and it is independent of the
// emitter: it knows nothing about CSIDriver.
func parseYAML(doc string) (any, error) {
	var ls []yline
	for n, raw := range strings.Split(doc, "\n") {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		if strings.Contains(raw, "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", n+1)
		}
		trimmed := strings.TrimLeft(raw, " ")
		ls = append(ls, yline{indent: len(raw) - len(trimmed), text: trimmed, n: n + 1})
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("empty document")
	}
	v, rest, err := parseBlock(ls, ls[0].indent)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("line %d: unexpected indentation", rest[0].n)
	}
	return v, nil
}

type yline struct {
	indent int
	text   string
	n      int
}

func parseBlock(ls []yline, indent int) (any, []yline, error) {
	if strings.HasPrefix(ls[0].text, "- ") {
		return parseList(ls, indent)
	}
	return parseMap(ls, indent)
}

func parseList(ls []yline, indent int) (any, []yline, error) {
	var out []any
	for len(ls) > 0 && ls[0].indent == indent && strings.HasPrefix(ls[0].text, "- ") {
		item := ls[0].text[2:]
		if _, _, isMap := splitKey(item); isMap {
			// "- key: v" starts a map whose keys sit at indent+2.
			sub := append([]yline{{indent: indent + 2, text: item, n: ls[0].n}}, ls[1:]...)
			v, rest, err := parseMap(sub, indent+2)
			if err != nil {
				return nil, nil, err
			}
			out, ls = append(out, v), rest
			continue
		}
		v, err := parseScalar(item)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", ls[0].n, err)
		}
		out, ls = append(out, v), ls[1:]
	}
	return out, ls, nil
}

func parseMap(ls []yline, indent int) (any, []yline, error) {
	out := map[string]any{}
	for len(ls) > 0 && ls[0].indent == indent {
		key, val, ok := splitKey(ls[0].text)
		if !ok {
			return nil, nil, fmt.Errorf("line %d: want key: value, got %q", ls[0].n, ls[0].text)
		}
		k, err := parseScalar(key)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: key: %w", ls[0].n, err)
		}
		ks, isString := k.(string)
		if !isString {
			return nil, nil, fmt.Errorf("line %d: key %q is not a string", ls[0].n, key)
		}
		if _, dup := out[ks]; dup {
			return nil, nil, fmt.Errorf("line %d: duplicate key %q", ls[0].n, ks)
		}
		n := ls[0].n
		ls = ls[1:]
		if val != "" {
			if out[ks], err = parseScalar(val); err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", n, err)
			}
			continue
		}
		// A nested block: lists may sit at the key's indentation or deeper.
		if len(ls) == 0 || ls[0].indent < indent || ls[0].indent == indent && !strings.HasPrefix(ls[0].text, "- ") {
			return nil, nil, fmt.Errorf("line %d: key %q has no value", n, ks)
		}
		var v any
		if v, ls, err = parseBlock(ls, ls[0].indent); err != nil {
			return nil, nil, err
		}
		out[ks] = v
	}
	return out, ls, nil
}

// splitKey splits "key: value" or "key:"; a quoted key may hold anything.
func splitKey(s string) (key, val string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		var q string
		dec := json.NewDecoder(strings.NewReader(s))
		if err := dec.Decode(&q); err != nil {
			return "", "", false
		}
		off := int(dec.InputOffset())
		rest := s[off:]
		if rest == ":" {
			return s[:off], "", true
		}
		if strings.HasPrefix(rest, ": ") {
			return s[:off], rest[2:], true
		}
		return "", "", false
	}
	if k, v, found := strings.Cut(s, ": "); found {
		return k, v, true
	}
	if strings.HasSuffix(s, ":") {
		return strings.TrimSuffix(s, ":"), "", true
	}
	return "", "", false
}

// parseScalar follows YAML 1.1 core resolution for the forms we meet.
func parseScalar(s string) (any, error) {
	if strings.HasPrefix(s, `"`) {
		var v string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("bad double-quoted scalar %s: %w", s, err)
		}
		return v, nil
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on", "y":
		return true, nil
	case "false", "no", "off", "n":
		return false, nil
	case "null", "~", "":
		return nil, nil
	case "{}":
		return map[string]any{}, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f, nil
	}
	if strings.ContainsAny(s[:1], "&*!|>'%@`{}[],#?:") {
		return nil, fmt.Errorf("plain scalar %q starts with an indicator", s)
	}
	if strings.Contains(s, ": ") || strings.Contains(s, " #") {
		return nil, fmt.Errorf("plain scalar %q is ambiguous", s)
	}
	return s, nil
}
