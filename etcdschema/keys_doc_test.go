package etcdschema

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// docPath is docs/etcd-keys.md seen from this package's directory.
const docPath = "../docs/etcd-keys.md"

func readKeysDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("read %s: %v", docPath, err)
	}
	return string(b)
}

// TestKeysDocumented fails when a method of Keys has no entry in
// docs/etcd-keys.md, so a key added without its documentation fails CI.
// An entry names the method as "`Keys.<Method>`".
func TestKeysDocumented(t *testing.T) {
	doc := readKeysDoc(t)
	typ := reflect.TypeOf(Keys{})
	if typ.NumMethod() == 0 {
		t.Fatal("reflection found no exported method on Keys")
	}
	for i := 0; i < typ.NumMethod(); i++ {
		name := typ.Method(i).Name
		if !strings.Contains(doc, "`Keys."+name+"`") {
			t.Errorf("%s does not document Keys.%s: add an entry naming \"`Keys.%s`\" with its key, value, writers and readers",
				docPath, name, name)
		}
	}
}

// TestKeysDocJSONExamples checks that every ```json block in the doc is
// valid JSON and, being a stored value, carries its schema "version".
func TestKeysDocJSONExamples(t *testing.T) {
	blocks := jsonBlocks(readKeysDoc(t))
	if len(blocks) == 0 {
		t.Fatalf("%s has no ```json example", docPath)
	}
	for _, b := range blocks {
		var v map[string]any
		if err := json.Unmarshal([]byte(b.text), &v); err != nil {
			t.Errorf("%s:%d: json example does not parse: %v", docPath, b.line, err)
			continue
		}
		if _, ok := v["version"]; !ok {
			t.Errorf("%s:%d: json example has no \"version\" field", docPath, b.line)
		}
		// The example must be a value of the type its entry names, with no
		// field that type does not have (a misspelt or stale json tag).
		newValue, ok := docValueTypes[b.valueType]
		if !ok {
			t.Errorf("%s:%d: json example follows Value `%s`, which the test does not know; add it to docValueTypes", docPath, b.line, b.valueType)
			continue
		}
		dec := json.NewDecoder(strings.NewReader(b.text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(newValue()); err != nil {
			t.Errorf("%s:%d: json example is not a %s: %v", docPath, b.line, b.valueType, err)
		}
	}
}

// docValueTypes are the value types the doc's entries name ("Value `T`").
var docValueTypes = map[string]func() any{
	"Aggregate": func() any { return new(Aggregate) }, "AggregateName": func() any { return new(AggregateName) },
	"AggregateLastID": func() any { return new(AggregateLastID) },
	"Alive":           func() any { return new(Alive) }, "Alternates": func() any { return new(Alternates) },
	"Build": func() any { return new(Build) }, "BuildRequest": func() any { return new(BuildRequest) },
	"Cell": func() any { return new(Cell) }, "Consumer": func() any { return new(Consumer) },
	"CustomResourceClass": func() any { return new(CustomResourceClass) }, "CustomTrait": func() any { return new(CustomTrait) },
	"Flavor": func() any { return new(Flavor) }, "HostDown": func() any { return new(HostDown) },
	"HostDrain": func() any { return new(HostDrain) }, "ShelvedOffload": func() any { return new(ShelvedOffload) },
	"HostMapping": func() any { return new(HostMapping) }, "HostSync": func() any { return new(HostSync) },
	"HostCapacity": func() any { return new(HostCapacity) },
	"Image":        func() any { return new(Image) },
	"Instance":     func() any { return new(Instance) }, "InstanceInfo": func() any { return new(InstanceInfo) },
	"InstanceMapping": func() any { return new(InstanceMapping) }, "Lease": func() any { return new(Lease) },
	"Member": func() any { return new(Member) }, "Provider": func() any { return new(Provider) },
	"ProviderName": func() any { return new(ProviderName) }, "Retry": func() any { return new(Retry) },
	"ServerGroup": func() any { return new(ServerGroup) }, "ServerGroupMember": func() any { return new(ServerGroupMember) },
	"ServerGroupSlot": func() any { return new(ServerGroupSlot) }, "Service": func() any { return new(Service) },
	"SigningKey": func() any { return new(SigningKey) },
	"QuotaSet":   func() any { return new(QuotaSet) }, "QuotaFence": func() any { return new(QuotaFence) },
	"QuotaInstance": func() any { return new(QuotaInstance) }, "QuotaIndex": func() any { return new(QuotaIndex) },
	"ServerCounts": func() any { return new(ServerCounts) },
	"Migration":    func() any { return new(Migration) }, "MoveRequest": func() any { return new(MoveRequest) },
}

type docBlock struct {
	line      int // 1-based line of the opening fence
	text      string
	valueType string // T of the last "Value `T`" line before the block
}

// jsonBlocks returns the bodies of the ```json fenced blocks of a markdown
// text. An unclosed block is returned too, so that its parse fails loudly.
func jsonBlocks(md string) []docBlock {
	var out []docBlock
	var cur *docBlock
	var body []string
	valueType := ""
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == nil && strings.HasPrefix(trimmed, "Value `") {
			if t, _, ok := strings.Cut(strings.TrimPrefix(trimmed, "Value `"), "`"); ok {
				valueType = t
			}
		}
		switch {
		case cur == nil && trimmed == "```json":
			cur = &docBlock{line: i + 1, valueType: valueType}
			body = nil
		case cur != nil && trimmed == "```":
			cur.text = strings.Join(body, "\n")
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		}
	}
	if cur != nil {
		cur.text = strings.Join(body, "\n")
		out = append(out, *cur)
	}
	return out
}

func TestJSONBlocks(t *testing.T) {
	md := "a\n```json\n{\"version\": 1}\n```\n```sh\nnot json\n```\n```json\n{\"x\":\n"
	got := jsonBlocks(md)
	if len(got) != 2 || got[0].text != `{"version": 1}` || got[0].line != 2 || got[1].line != 8 {
		t.Fatalf("jsonBlocks = %+v", got)
	}
}
