package doccheck // import "github.com/otelcol-ai/otelcol-ai/internal/doccheck"

import (
	"reflect"
	"strings"
)

// Key is one config key, as a user writes it in YAML, segments joined by
// "::": `windows::retention`, `features[i]::scale`, `models::<name>::version_policy`.
type Key struct {
	Path string
	// MustDocument is true for the leaves of the project's own config
	// structs. Keys of structs from other modules (collector core's HTTP
	// server settings, its scraper controller) are valid to document but
	// documented where they come from.
	MustDocument bool
}

// maxDepth bounds the walk through nested config structs.
const maxDepth = 12

// ConfigKeys returns the keys of cfg (a component's config, as its
// factory's CreateDefaultConfig returns it) from its mapstructure tags:
// nested structs become key::subkey, `,squash` fields stay at their
// parent's level, slices of structs key[i]::subkey, maps of structs
// key::<name>::subkey. Fields of structs declared in a package under
// module must be documented; those of mdatagen's generated metadata
// packages (metrics::<name>::enabled and the like) are documented in
// documentation.md, and valid in a README.
func ConfigKeys(cfg any, module string) []Key {
	var keys []Key
	walkStruct(reflect.TypeOf(cfg), "", module, 0, &keys)
	return keys
}

func walkStruct(t reflect.Type, prefix, module string, depth int, keys *[]Key) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || depth > maxDepth {
		return
	}
	generated := strings.HasSuffix(t.PkgPath(), "/internal/metadata")
	ours := (strings.HasPrefix(t.PkgPath(), module+"/") || t.PkgPath() == module) && !generated
	perName := generated && onePerName(t)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, ok := f.Tag.Lookup("mapstructure")
		if !ok || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "squash") {
			walkStruct(f.Type, prefix, module, depth+1, keys)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path := prefix + name
		if perName {
			// mdatagen names a field per metric or attribute: the docs
			// write it as a placeholder.
			path = prefix + "<>"
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case hasTaggedFields(ft):
			*keys = append(*keys, Key{Path: path})
			walkStruct(ft, path+"::", module, depth+1, keys)
		case (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && hasTaggedFields(deref(ft.Elem())):
			*keys = append(*keys, Key{Path: path, MustDocument: ours})
			walkStruct(deref(ft.Elem()), path+"[]::", module, depth+1, keys)
		case ft.Kind() == reflect.Map && hasTaggedFields(deref(ft.Elem())):
			*keys = append(*keys, Key{Path: path, MustDocument: ours})
			walkStruct(deref(ft.Elem()), path+"::<>::", module, depth+1, keys)
		default:
			*keys = append(*keys, Key{Path: path, MustDocument: ours})
		}
	}
	// A generated struct's fields all have one path: keep one key each.
	if perName {
		dedupe(keys)
	}
}

// onePerName reports whether t's fields are one struct type, one field per
// name (mdatagen's MetricsConfig, ResourceAttributesConfig, EventsConfig).
func onePerName(t reflect.Type) bool {
	var elem reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		if _, ok := f.Tag.Lookup("mapstructure"); !ok || !f.IsExported() {
			continue
		}
		if f.Type.Kind() != reflect.Struct || (elem != nil && f.Type != elem) {
			return false
		}
		elem = f.Type
	}
	return elem != nil
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// hasTaggedFields reports whether t is a struct that mapstructure reads
// field by field (not a value such as component.ID or time.Time).
func hasTaggedFields(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if _, ok := f.Tag.Lookup("mapstructure"); ok && f.IsExported() {
			return true
		}
	}
	return false
}

func dedupe(keys *[]Key) {
	seen := map[string]bool{}
	out := (*keys)[:0]
	for _, k := range *keys {
		if !seen[k.Path] {
			seen[k.Path] = true
			out = append(out, k)
		}
	}
	*keys = out
}
