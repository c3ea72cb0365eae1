package embedetcd

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/berth-project/berth/internal/logtest"
)

// TestSlowRequestWarningsAreRateLimited: a flood of one warning family
// is cut to perSecond lines a second; the first line of the next second
// says how many were dropped; errors and other families are unaffected.
func TestSlowRequestWarningsAreRateLimited(t *testing.T) {
	var buf logtest.Buffer
	lg, err := newZapLogger(bufferLogger(&buf, hclog.Trace, false), "warn", nil)
	if err != nil {
		t.Fatal(err)
	}
	core := lg.Core().(*hclogCore)
	clock := time.Unix(1000, 0)
	core.limit.now = func() time.Time { return clock }
	lg = lg.With(zap.String("local-member-id", "8e9e05c52164694d"))

	for i := range 100 {
		lg.Warn("apply request took too long", zap.Int("i", i))
		lg.Warn("trace[" + string(rune('a'+i%26)) + "] range") // one family whatever the id
	}
	lg.Error("lost the leader")
	lg.Warn("slow fdatasync")
	clock = clock.Add(time.Second)
	lg.Warn("apply request took too long", zap.Int("i", 100))

	out := buf.String()
	if n := strings.Count(out, "apply request took too long"); n != perSecond+1 {
		t.Errorf("%d apply warnings written, want %d:\n%s", n, perSecond+1, out)
	}
	if n := strings.Count(out, "] range"); n != perSecond {
		t.Errorf("%d trace warnings written, want %d", n, perSecond)
	}
	for _, want := range []string{"lost the leader", "slow fdatasync",
		"apply request took too long: local-member-id=8e9e05c52164694d suppressed=95 i=100"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "suppressed=") != 1 {
		t.Errorf("want one line with the dropped count:\n%s", out)
	}
}

func TestRateLimiterNeverDropsErrors(t *testing.T) {
	r := newRateLimiter()
	for range 100 {
		if ok, _ := r.allow(zapcore.ErrorLevel, "x"); !ok {
			t.Fatal("an error was dropped")
		}
	}
}
