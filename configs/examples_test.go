package configs

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/gohcl"
)

// TestExamples decodes every example so they never rot, and checks each
// is accepted by the role it is written for.
func TestExamples(t *testing.T) {
	roles := map[string]string{
		"server.hcl":     RoleServer,
		"conductor.hcl":  RoleConductor,
		"agent.hcl":      RoleAgent,
		"all-in-one.hcl": RoleServer,
		"dev.hcl":        RoleDev,
		"etcd.hcl":       RoleEtcd,
	}
	files, err := filepath.Glob("examples/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(roles) {
		t.Errorf("examples = %v, want one per role in %v", files, roles)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			role, ok := roles[filepath.Base(f)]
			if !ok {
				t.Fatalf("no role known for %s; add it to the table", f)
			}
			if err := cfg.Require(role); err != nil {
				t.Errorf("Require(%q): %v", role, err)
			}
			// The filter names are checked by the scheduler's tests: the
			// registry lives there, and this package cannot import it.
		})
	}
}

// TestExamplesDocumentEveryOption fails when an option is added to the
// schema but to no example: the examples are the documentation.
func TestExamplesDocumentEveryOption(t *testing.T) {
	files, _ := filepath.Glob("examples/*.hcl")
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	text := all.String()
	names := schemaNames(reflect.TypeOf(rawFile{}))
	if len(names) < 60 {
		t.Fatalf("schemaNames found only %d names; the walk is broken", len(names))
	}
	var missing []string
	for _, name := range names {
		// As an attribute "name =" or a block "name {" / `name "label" {`,
		// set or commented out.
		re := regexp.MustCompile(`(?m)^[\s#]*` + regexp.QuoteMeta(name) + `\s*(=|\{|")`)
		if !re.MatchString(text) {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("options documented in no example: %v", missing)
	}
}

func schemaNames(ty reflect.Type) []string {
	schema, _ := gohcl.ImpliedBodySchema(reflect.New(ty).Interface())
	var names []string
	for _, a := range schema.Attributes {
		names = append(names, a.Name)
	}
	for _, b := range schema.Blocks {
		names = append(names, b.Type)
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			if f.Tag.Get("hcl") == b.Type+",block" {
				et := f.Type
				for et.Kind() == reflect.Pointer || et.Kind() == reflect.Slice {
					et = et.Elem()
				}
				names = append(names, schemaNames(et)...)
			}
		}
	}
	return names
}
