package scheduler

import (
	"path/filepath"
	"testing"

	"github.com/berth-project/berth/configs"
)

// TestConfigExamplesNameKnownFilters checks the example configs' and the
// defaults' enabled_filters against this package's registry (configs
// cannot import it, so the check lives here).
func TestConfigExamplesNameKnownFilters(t *testing.T) {
	files, err := filepath.Glob("../configs/examples/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		cfg, err := configs.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if cfg.Scheduler == nil {
			continue
		}
		if err := cfg.Scheduler.CheckFilters(FilterNames()); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := configs.Defaults().Scheduler.CheckFilters(FilterNames()); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
