package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/berth-project/berth/internal/testwait"
)

// TestGophercloudDrivesBerth drives a real `berth dev` with gophercloud,
// the Go SDK under Terraform's OpenStack provider, exactly as a Go user
// would: a password login at Berth's identity endpoint, the compute and
// image clients from the token's catalog, then flavors, zones,
// hypervisors, services, aggregates, server groups and a server's whole
// life. Every answer is decoded by gophercloud's own result types, so a
// field Berth names or shapes differently from Nova shows up here.
func TestGophercloudDrivesBerth(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	dev := startSDKDev(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	provider, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: dev.identityURL,
		Username:         sdkUser,
		Password:         sdkPassword,
		DomainName:       "Default",
		TenantName:       sdkProject,
	})
	if err != nil {
		t.Fatalf("password login at %s: %v", dev.identityURL, err)
	}
	compute, err := openstack.NewComputeV2(provider, gophercloud.EndpointOpts{})
	if err != nil {
		t.Fatalf("compute endpoint from the catalog: %v", err)
	}
	if compute.Endpoint != dev.computeURL+"/" {
		t.Errorf("catalog's compute endpoint = %q, want %q", compute.Endpoint, dev.computeURL+"/")
	}
	// 2.74: the newest microversion gophercloud's server fields and the
	// string networks ("none", 2.37+) and policy (2.64+) need.
	compute.Microversion = "2.74"
	image, err := openstack.NewImageV2(provider, gophercloud.EndpointOpts{})
	if err != nil {
		t.Fatalf("image endpoint from the catalog: %v", err)
	}

	// Flavors: dev's defaults, then one of ours with an extra spec.
	all := func(what string, pager pagination.Pager) pagination.Page {
		t.Helper()
		page, err := pager.AllPages(ctx)
		if err != nil {
			t.Fatalf("list %s: %v", what, err)
		}
		return page
	}
	defaults, err := flavors.ExtractFlavors(all("flavors", flavors.ListDetail(compute, nil)))
	if err != nil || len(defaults) == 0 {
		t.Fatalf("flavors = %v, %v; want dev's default flavors", defaults, err)
	}
	disk := 1
	flavor, err := flavors.Create(ctx, compute, flavors.CreateOpts{
		Name: "gc-small", RAM: 256, VCPUs: 1, Disk: &disk, Description: "made by gophercloud",
	}).Extract()
	if err != nil {
		t.Fatalf("create flavor: %v", err)
	}
	if flavor.Name != "gc-small" || flavor.RAM != 256 || flavor.VCPUs != 1 || flavor.Disk != 1 ||
		!flavor.IsPublic || flavor.Description != "made by gophercloud" || flavor.ID == "" {
		t.Errorf("created flavor = %+v", flavor)
	}
	specs, err := flavors.CreateExtraSpecs(ctx, compute, flavor.ID, flavors.ExtraSpecsOpts{"hw:cpu_policy": "shared"}).Extract()
	if err != nil || specs["hw:cpu_policy"] != "shared" {
		t.Fatalf("create extra spec: %v, %v", specs, err)
	}
	if got, err := flavors.Get(ctx, compute, flavor.ID).Extract(); err != nil || got.ExtraSpecs["hw:cpu_policy"] != "shared" {
		t.Errorf("flavor get (2.61+ shows extra specs) = %+v, %v", got, err)
	}
	if listed, err := flavors.ListExtraSpecs(ctx, compute, flavor.ID).Extract(); err != nil || len(listed) != 1 || listed["hw:cpu_policy"] != "shared" {
		t.Errorf("list extra specs = %v, %v", listed, err)
	}

	// Zones, hypervisors, services.
	zones, err := availabilityzones.ExtractAvailabilityZones(all("zones", availabilityzones.List(compute)))
	if err != nil || len(zones) != 1 || zones[0].ZoneName != "nova" || !zones[0].ZoneState.Available {
		t.Errorf("availability zones = %+v, %v; want the default zone nova, available", zones, err)
	}
	hvs, err := hypervisors.ExtractHypervisors(all("hypervisors", hypervisors.List(compute, nil)))
	if err != nil || len(hvs) != dev.hosts {
		t.Fatalf("hypervisors = %+v, %v; want %d", hvs, err, dev.hosts)
	}
	var hvNames []string
	for _, hv := range hvs {
		hvNames = append(hvNames, hv.HypervisorHostname)
		if hv.State != "up" || hv.Status != "enabled" || hv.ID == "" {
			t.Errorf("hypervisor %+v: want up, enabled, with an id", hv)
		}
	}
	slices.Sort(hvNames)
	if want := []string{"compute-1", "compute-2"}; !slices.Equal(hvNames, want) {
		t.Errorf("hypervisor names = %v, want %v", hvNames, want)
	}
	svcs, err := services.ExtractServices(all("services", services.List(compute, services.ListOpts{Binary: "nova-compute"})))
	if err != nil || len(svcs) != dev.hosts {
		t.Fatalf("compute services = %+v, %v; want %d", svcs, err, dev.hosts)
	}
	svc := svcs[0]
	if svc.ID == "" || svc.State != "up" || svc.Status != "enabled" || svc.Zone != "nova" {
		t.Errorf("service = %+v; want an id, up, enabled, in nova", svc)
	}
	disabled, err := services.Update(ctx, compute, svc.ID, services.UpdateOpts{
		Status: services.ServiceDisabled, DisabledReason: "gophercloud maintenance"}).Extract()
	if err != nil || disabled.Status != "disabled" || disabled.DisabledReason != "gophercloud maintenance" || disabled.Host != svc.Host {
		t.Fatalf("disable service %s: %+v, %v", svc.ID, disabled, err)
	}
	enabled, err := services.Update(ctx, compute, svc.ID, services.UpdateOpts{Status: services.ServiceEnabled}).Extract()
	if err != nil || enabled.Status != "enabled" || enabled.DisabledReason != "" {
		t.Fatalf("enable service %s: %+v, %v", svc.ID, enabled, err)
	}

	// An aggregate with a zone and a host.
	agg, err := aggregates.Create(ctx, compute, aggregates.CreateOpts{Name: "gc-agg", AvailabilityZone: "gc-az"}).Extract()
	if err != nil || agg.Name != "gc-agg" || agg.AvailabilityZone != "gc-az" || agg.ID == 0 || agg.UUID == "" {
		t.Fatalf("create aggregate: %+v, %v", agg, err)
	}
	withHost, err := aggregates.AddHost(ctx, compute, agg.ID, aggregates.AddHostOpts{Host: "compute-2"}).Extract()
	if err != nil || !slices.Equal(withHost.Hosts, []string{"compute-2"}) || withHost.Metadata["availability_zone"] != "gc-az" {
		t.Fatalf("add host to aggregate: %+v, %v", withHost, err)
	}
	aggs, err := aggregates.ExtractAggregates(all("aggregates", aggregates.List(compute)))
	if err != nil || len(aggs) != 1 || aggs[0].ID != agg.ID {
		t.Errorf("aggregates = %+v, %v", aggs, err)
	}
	zones, err = availabilityzones.ExtractAvailabilityZones(all("zones", availabilityzones.List(compute)))
	var zoneNames []string
	for _, z := range zones {
		zoneNames = append(zoneNames, z.ZoneName)
	}
	slices.Sort(zoneNames)
	if err != nil || !slices.Equal(zoneNames, []string{"gc-az", "nova"}) {
		t.Errorf("zones after the aggregate = %v, %v; want gc-az and nova", zoneNames, err)
	}

	// A server group.
	group, err := servergroups.Create(ctx, compute, servergroups.CreateOpts{Name: "gc-group", Policy: "anti-affinity"}).Extract()
	if err != nil || group.Name != "gc-group" || group.Policy == nil || *group.Policy != "anti-affinity" || group.ID == "" || len(group.Members) != 0 {
		t.Fatalf("create server group: %+v, %v", group, err)
	}

	// A server in the group, from an image found by name in the catalog's
	// image API.
	imgs, err := images.ExtractImages(all("images", images.List(image, images.ListOpts{Name: "berth-sleep"})))
	if err != nil || len(imgs) != 1 || imgs[0].Name != "berth-sleep" || imgs[0].Status != images.ImageStatusActive {
		t.Fatalf("images named berth-sleep = %+v, %v", imgs, err)
	}
	imageID := imgs[0].ID
	created, err := servers.Create(ctx, compute, servers.CreateOpts{
		Name: "gc-server", FlavorRef: flavor.ID, ImageRef: imageID, Networks: "none",
	}, servers.SchedulerHintOpts{Group: group.ID}).Extract()
	if err != nil || created.ID == "" {
		t.Fatalf("create server: %+v, %v", created, err)
	}
	var srv *servers.Server
	testwait.Poll(t, 60*time.Second, "server ACTIVE", func() (bool, string) {
		srv, err = servers.Get(ctx, compute, created.ID).Extract()
		if err != nil {
			return false, err.Error()
		}
		if srv.Status == "ERROR" {
			t.Fatalf("server went to ERROR: %+v", srv.Fault)
		}
		return srv.Status == "ACTIVE", srv.Status
	})
	if srv.Name != "gc-server" || srv.Flavor["original_name"] != "gc-small" || srv.Image["id"] != imageID ||
		!slices.Contains(hvNames, srv.Host) || srv.VmState != "active" || srv.AvailabilityZone == "" {
		t.Errorf("active server = %+v", srv)
	}
	if srv.ServerGroups == nil || !slices.Equal(*srv.ServerGroups, []string{group.ID}) {
		t.Errorf("server's server_groups (2.71+) = %v, want [%s]", srv.ServerGroups, group.ID)
	}
	if extra, _ := srv.Flavor["extra_specs"].(map[string]any); extra["hw:cpu_policy"] != "shared" {
		t.Errorf("server's flavor extra specs = %v", srv.Flavor)
	}
	listed, err := servers.ExtractServers(all("servers", servers.List(compute, servers.ListOpts{Name: "gc-server"})))
	if err != nil || len(listed) != 1 || listed[0].ID != created.ID || listed[0].Status != "ACTIVE" {
		t.Errorf("servers named gc-server = %+v, %v", listed, err)
	}
	if g, err := servergroups.Get(ctx, compute, group.ID).Extract(); err != nil || !slices.Equal(g.Members, []string{created.ID}) {
		t.Errorf("group members after the build = %+v, %v", g, err)
	}

	// Delete the server and wait until it is gone (404).
	if err := servers.Delete(ctx, compute, created.ID).ExtractErr(); err != nil {
		t.Fatalf("delete server: %v", err)
	}
	testwait.Poll(t, 60*time.Second, "server gone", func() (bool, string) {
		s, err := servers.Get(ctx, compute, created.ID).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, s.Status
	})

	// Tear down what we made; each delete must really delete.
	if err := servergroups.Delete(ctx, compute, group.ID).ExtractErr(); err != nil {
		t.Errorf("delete server group: %v", err)
	}
	if _, err := servergroups.Get(ctx, compute, group.ID).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("server group after delete: %v, want 404", err)
	}
	if _, err := aggregates.RemoveHost(ctx, compute, agg.ID, aggregates.RemoveHostOpts{Host: "compute-2"}).Extract(); err != nil {
		t.Errorf("remove host from aggregate: %v", err)
	}
	if err := aggregates.Delete(ctx, compute, agg.ID).ExtractErr(); err != nil {
		t.Errorf("delete aggregate: %v", err)
	}
	if _, err := aggregates.Get(ctx, compute, agg.ID).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("aggregate after delete: %v, want 404", err)
	}
	if err := flavors.Delete(ctx, compute, flavor.ID).ExtractErr(); err != nil {
		t.Errorf("delete flavor: %v", err)
	}
	_, err = flavors.Get(ctx, compute, flavor.ID).Extract()
	var notFound gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &notFound) || notFound.Actual != http.StatusNotFound {
		t.Errorf("flavor after delete: %v, want 404", fmt.Sprint(err))
	}
}
