package etcdtally

import (
	"testing"

	"github.com/berth-project/berth/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
