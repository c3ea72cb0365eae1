package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-project/berth/configs"
)

func TestNewText(t *testing.T) {
	var buf bytes.Buffer
	log := New(configs.Log{Level: "warn", Format: configs.LogFormatText}, &buf)
	sched := log.Named("scheduler")
	sched.Info("hidden")
	sched.Warn("no valid host", KeyInstance, "i-1", KeyCell, "cell1")
	out := buf.String()
	if strings.Contains(out, "hidden") {
		t.Errorf("info logged at level warn: %q", out)
	}
	for _, want := range []string{"[WARN]", "berth.scheduler: no valid host", "instance=i-1", "cell=cell1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
}

func TestNewJSON(t *testing.T) {
	var buf bytes.Buffer
	New(configs.Log{Level: "debug", Format: configs.LogFormatJSON}, &buf).
		Named("agent").Debug("built", KeyHost, "compute-1", KeyRequestID, "req-1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON object: %q: %v", buf.String(), err)
	}
	if line["@module"] != "berth.agent" || line["@level"] != "debug" || line[KeyHost] != "compute-1" || line[KeyRequestID] != "req-1" {
		t.Errorf("JSON line = %v", line)
	}
}

func TestNewZeroConfigLogsInfo(t *testing.T) {
	var buf bytes.Buffer
	log := New(configs.Log{}, &buf)
	log.Debug("hidden")
	log.Info("shown")
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, "shown") || strings.HasPrefix(out, "{") {
		t.Errorf("zero config output = %q, want text at info", out)
	}
}
