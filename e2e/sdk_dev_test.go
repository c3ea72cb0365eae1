package e2e

import (
	"fmt"
	"testing"

	"github.com/berth-project/berth/configs"
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
	apiAddr, identAddr := freeAddr(t), freeAddr(t)
	startProc(t, "dev", "dev", "-data-dir", t.TempDir(),
		"-etcd", freeAddr(t), "-etcd-peer", freeAddr(t),
		"-api", apiAddr, "-placement", freeAddr(t), "-image", freeAddr(t), "-identity", identAddr,
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
