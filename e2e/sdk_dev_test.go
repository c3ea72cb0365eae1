package e2e

import (
	"fmt"
	"testing"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/etcdtest"
)

// sdkDev is a running `berth dev` whose identity, compute and image APIs
// an SDK reaches the way a user's does: through the identity endpoint and
// its catalog, logging in with dev's printed admin password.
type sdkDev struct {
	identityURL string // .../v3
	computeURL  string // .../v2.1, for messages only: SDKs use the catalog
	hosts       int
}

// startSDKDev starts `berth dev` with hosts hosts in one cell, every port
// drawn free, and waits until its hosts are up and identity answers.
func startSDKDev(t *testing.T, hosts int) sdkDev {
	t.Helper()
	free := func() string { return fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)) }
	apiAddr, identAddr := free(), free()
	startProc(t, "dev", "dev", "-data-dir", t.TempDir(),
		"-etcd", free(), "-etcd-peer", free(),
		"-api", apiAddr, "-placement", free(), "-image", free(), "-identity", identAddr,
		"-hosts", fmt.Sprint(hosts), "-cells", "1")
	apiURL := "http://" + apiAddr
	waitHTTP(t, apiURL+"/healthz")
	waitHTTP(t, "http://"+identAddr+"/v3")
	waitHostsUp(t, apiURL, hosts)
	return sdkDev{identityURL: "http://" + identAddr + "/v3", computeURL: apiURL + "/v2.1", hosts: hosts}
}

// The dev login `berth dev` prints.
const (
	sdkUser     = configs.DevAdminUser
	sdkPassword = configs.DevAdminPassword
	sdkProject  = configs.DevAdminProject
)
