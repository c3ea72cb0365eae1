package rawtxn_test

import (
	"testing"

	"github.com/berth-project/berth/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
