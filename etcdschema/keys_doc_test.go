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
	}
}

type docBlock struct {
	line int // 1-based line of the opening fence
	text string
}

// jsonBlocks returns the bodies of the ```json fenced blocks of a markdown
// text. An unclosed block is returned too, so that its parse fails loudly.
func jsonBlocks(md string) []docBlock {
	var out []docBlock
	var cur *docBlock
	var body []string
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```json":
			cur = &docBlock{line: i + 1}
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
