package configs

import "github.com/hashicorp/hcl/v2"

// The raw shape gohcl decodes into: every attribute a pointer so unset is
// told from zero, every block keeps its body and range for diagnostics.

type rawFile struct {
	// DefaultAvailabilityZone is Nova's [DEFAULT] option: shared by the
	// API (which zones a request may name) and the scheduler.
	DefaultAvailabilityZone *string `hcl:"default_availability_zone"`

	Etcd           *rawEtcd           `hcl:"etcd,block"`
	Log            *rawLog            `hcl:"log,block"`
	Runtime        *rawRuntime        `hcl:"runtime,block"`
	Status         *rawStatus         `hcl:"status,block"`
	HTTP           *rawHTTP           `hcl:"http,block"`
	TLS            *rawProcessTLS     `hcl:"tls,block"`
	API            *rawAPI            `hcl:"api,block"`
	Placement      *rawPlacement      `hcl:"placement,block"`
	Scheduler      *rawScheduler      `hcl:"scheduler,block"`
	Superconductor *rawSuperconductor `hcl:"superconductor,block"`
	Conductor      *rawConductor      `hcl:"conductor,block"`
	Agent          *rawAgent          `hcl:"agent,block"`
	Identity       *rawIdentity       `hcl:"identity,block"`
	Image          *rawImage          `hcl:"image,block"`

	Body hcl.Body `hcl:",body"`
}

type rawEtcd struct {
	Prefix      *string      `hcl:"prefix"`
	DialTimeout *string      `hcl:"dial_timeout"`
	Endpoints   *[]string    `hcl:"endpoints"`
	Username    *string      `hcl:"username"`
	Password    *string      `hcl:"password"`
	TLS         *rawTLS      `hcl:"tls,block"`
	Embedded    *rawEmbedded `hcl:"embedded,block"`
	DefRange    hcl.Range    `hcl:",def_range"`
	Body        hcl.Body     `hcl:",body"`
}

type rawTLS struct {
	CAFile   *string   `hcl:"ca_file"`
	CertFile *string   `hcl:"cert_file"`
	KeyFile  *string   `hcl:"key_file"`
	DefRange hcl.Range `hcl:",def_range"`
	Body     hcl.Body  `hcl:",body"`
}

type rawEmbedded struct {
	DataDir                 *string   `hcl:"data_dir"`
	ClientURL               *string   `hcl:"client_url"`
	PeerURL                 *string   `hcl:"peer_url"`
	Name                    *string   `hcl:"name"`
	AutoCompactionRetention *string   `hcl:"auto_compaction_retention"`
	QuotaBackendBytes       *int64    `hcl:"quota_backend_bytes"`
	InitialCluster          *string   `hcl:"initial_cluster"`
	InitialClusterState     *string   `hcl:"initial_cluster_state"`
	LogLevel                *string   `hcl:"log_level"`
	HeartbeatInterval       *string   `hcl:"heartbeat_interval"`
	ElectionTimeout         *string   `hcl:"election_timeout"`
	DefRange                hcl.Range `hcl:",def_range"`
	Body                    hcl.Body  `hcl:",body"`
}

type rawLog struct {
	Level  *string  `hcl:"level"`
	Format *string  `hcl:"format"`
	Body   hcl.Body `hcl:",body"`
}

type rawRuntime struct {
	GCPercent   *int64    `hcl:"gc_percent"`
	MemoryLimit *string   `hcl:"memory_limit"`
	DefRange    hcl.Range `hcl:",def_range"`
	Body        hcl.Body  `hcl:",body"`
}

type rawStatus struct {
	Bind     *string   `hcl:"bind"`
	DefRange hcl.Range `hcl:",def_range"`
	Body     hcl.Body  `hcl:",body"`
}

type rawHTTP struct {
	ReadHeaderTimeout *string  `hcl:"read_header_timeout"`
	ReadTimeout       *string  `hcl:"read_timeout"`
	WriteTimeout      *string  `hcl:"write_timeout"`
	IdleTimeout       *string  `hcl:"idle_timeout"`
	RequestTimeout    *string  `hcl:"request_timeout"`
	MaxHeaderBytes    *int64   `hcl:"max_header_bytes"`
	MaxBodyBytes      *int64   `hcl:"max_body_bytes"`
	MaxConnections    *int64   `hcl:"max_connections"`
	Body              hcl.Body `hcl:",body"`
}

type rawAPI struct {
	Bind                  *string   `hcl:"bind"`
	Auth                  *string   `hcl:"auth"`
	Quota                 *rawQuota `hcl:"quota,block"`
	AllowResizeToSameHost *bool     `hcl:"allow_resize_to_same_host"`
	ShelvedOffloadTime    *int64    `hcl:"shelved_offload_time"`
	ResizeConfirmWindow   *string   `hcl:"resize_confirm_window"`
	DefRange              hcl.Range `hcl:",def_range"`
	Body                  hcl.Body  `hcl:",body"`
}

// rawQuota is the api block's quota block: Nova's [quota] options, by
// the os-quota-sets resource names.
type rawQuota struct {
	Instances                *int64    `hcl:"instances"`
	Cores                    *int64    `hcl:"cores"`
	RAM                      *int64    `hcl:"ram"`
	MetadataItems            *int64    `hcl:"metadata_items"`
	InjectedFiles            *int64    `hcl:"injected_files"`
	InjectedFileContentBytes *int64    `hcl:"injected_file_content_bytes"`
	InjectedFilePathBytes    *int64    `hcl:"injected_file_path_bytes"`
	KeyPairs                 *int64    `hcl:"key_pairs"`
	ServerGroups             *int64    `hcl:"server_groups"`
	ServerGroupMembers       *int64    `hcl:"server_group_members"`
	DefRange                 hcl.Range `hcl:",def_range"`
	Body                     hcl.Body  `hcl:",body"`
}

type rawImage struct {
	Bind     *string   `hcl:"bind"`
	Auth     *string   `hcl:"auth"`
	DefRange hcl.Range `hcl:",def_range"`
	Body     hcl.Body  `hcl:",body"`
}

type rawPlacement struct {
	Bind               *string    `hcl:"bind"`
	Auth               *string    `hcl:"auth"`
	CandidateWorkLimit *int64     `hcl:"candidate_work_limit"`
	Tokens             []rawToken `hcl:"token,block"`
	DefRange           hcl.Range  `hcl:",def_range"`
	Body               hcl.Body   `hcl:",body"`
}

type rawToken struct {
	Token       string    `hcl:"secret,label"` // "secret" is what HCL's missing-label error calls it
	Roles       *[]string `hcl:"roles"`
	ProjectID   *string   `hcl:"project_id"`
	UserID      *string   `hcl:"user_id"`
	SystemScope *string   `hcl:"system_scope"`
	LabelRange  hcl.Range `hcl:"secret,label_range"`
	DefRange    hcl.Range `hcl:",def_range"`
	Body        hcl.Body  `hcl:",body"`
}

type rawScheduler struct {
	Bind                        *string     `hcl:"bind"`
	MaxAttempts                 *int64      `hcl:"max_attempts"`
	HostSubsetSize              *int64      `hcl:"host_subset_size"`
	MaxPlacementResults         *int64      `hcl:"max_placement_results"`
	ShuffleBestSameWeighedHosts *bool       `hcl:"shuffle_best_same_weighed_hosts"`
	TrackInstanceChanges        *bool       `hcl:"track_instance_changes"`
	HostCapacityMetrics         *bool       `hcl:"host_capacity_metrics"`
	EnabledFilters              *[]string   `hcl:"enabled_filters"`
	MaxHostsToWeigh             *int64      `hcl:"max_hosts_to_weigh"`
	PlacementSampleSize         *int64      `hcl:"placement_sample_size"`
	LimitTenants                *bool       `hcl:"limit_tenants_to_placement_aggregate"`
	AggregateRequiredForTenants *bool       `hcl:"placement_aggregate_required_for_tenants"`
	IsolatedAggregates          *bool       `hcl:"enable_isolated_aggregate_filtering"`
	EmptyPlacementFallback      *bool       `hcl:"empty_placement_fallback"`
	ElectionTTL                 *string     `hcl:"election_ttl"`
	AdvertiseURL                *string     `hcl:"advertise_url"`
	LeaderInterval              *string     `hcl:"leader_interval"`
	DownHostGrace               *string     `hcl:"down_host_grace"`
	OrphanGrace                 *string     `hcl:"orphan_grace"`
	StuckBuildRequestTimeout    *string     `hcl:"stuck_build_request_timeout"`
	EtcdDefrag                  *bool       `hcl:"etcd_defrag"`
	EtcdDefragInterval          *string     `hcl:"etcd_defrag_interval"`
	EtcdDefragRatio             *float64    `hcl:"etcd_defrag_ratio"`
	EtcdDefragMinBytes          *int64      `hcl:"etcd_defrag_min_bytes"`
	Weights                     *rawWeights `hcl:"weights,block"`
	DefRange                    hcl.Range   `hcl:",def_range"`
	Body                        hcl.Body    `hcl:",body"`
}

type rawWeights struct {
	RAM              *float64 `hcl:"ram"`
	CPU              *float64 `hcl:"cpu"`
	Disk             *float64 `hcl:"disk"`
	IOOps            *float64 `hcl:"io_ops"`
	BuildFailure     *float64 `hcl:"build_failure"`
	SoftAffinity     *float64 `hcl:"soft_affinity"`
	SoftAntiAffinity *float64 `hcl:"soft_anti_affinity"`
	NumInstances     *float64 `hcl:"num_instances"`
}

type rawSuperconductor struct {
	Workers         *int64    `hcl:"workers"`
	LeaseTTL        *string   `hcl:"lease_ttl"`
	SelectTimeout   *string   `hcl:"select_timeout"`
	RankGrace       *string   `hcl:"rank_grace"`
	HolderIdleAfter *string   `hcl:"holder_idle_after"`
	StealAfter      *string   `hcl:"steal_after"`
	DefRange        hcl.Range `hcl:",def_range"`
	Body            hcl.Body  `hcl:",body"`
}

type rawConductor struct {
	Cell            *string   `hcl:"cell"`
	Workers         *int64    `hcl:"workers"`
	LeaseTTL        *string   `hcl:"lease_ttl"`
	RankGrace       *string   `hcl:"rank_grace"`
	HolderIdleAfter *string   `hcl:"holder_idle_after"`
	StealAfter      *string   `hcl:"steal_after"`
	DefRange        hcl.Range `hcl:",def_range"`
	Body            hcl.Body  `hcl:",body"`
}

type rawAgent struct {
	Host                 *string       `hcl:"host"`
	Cell                 *string       `hcl:"cell"`
	Driver               *string       `hcl:"driver"`
	ReportInterval       *string       `hcl:"report_interval"`
	ServiceDownTime      *string       `hcl:"service_down_time"`
	MaxConcurrentBuilds  *int64        `hcl:"max_concurrent_builds"`
	TrackInstanceChanges *bool         `hcl:"track_instance_changes"`
	InstanceSyncInterval *string       `hcl:"instance_sync_interval"`
	ProviderSyncInterval *string       `hcl:"provider_sync_interval"`
	ProviderRefresh      *string       `hcl:"resource_provider_association_refresh"`
	Inventory            *rawInventory `hcl:"inventory,block"`
	Fake                 *rawFake      `hcl:"fake,block"`
	Process              *rawProcess   `hcl:"process,block"`
	DefRange             hcl.Range     `hcl:",def_range"`
	Body                 hcl.Body      `hcl:",body"`
}

type rawInventory struct {
	VCPUs                *int64    `hcl:"vcpus"`
	MemoryMB             *int64    `hcl:"memory_mb"`
	DiskGB               *int64    `hcl:"disk_gb"`
	ReservedHostMemoryMB *int64    `hcl:"reserved_host_memory_mb"`
	ReservedHostDiskGB   *int64    `hcl:"reserved_host_disk_gb"`
	ReservedHostCPUs     *int64    `hcl:"reserved_host_cpus"`
	CPUAllocationRatio   *float64  `hcl:"cpu_allocation_ratio"`
	RAMAllocationRatio   *float64  `hcl:"ram_allocation_ratio"`
	DiskAllocationRatio  *float64  `hcl:"disk_allocation_ratio"`
	DefRange             hcl.Range `hcl:",def_range"`
	Body                 hcl.Body  `hcl:",body"`
}

type rawProcess struct {
	Command   *string  `hcl:"command"`
	StateDir  *string  `hcl:"state_dir"`
	StopGrace *string  `hcl:"stop_grace"`
	Body      hcl.Body `hcl:",body"`
}

type rawFake struct {
	BuildTime         *string  `hcl:"build_time"`
	FailureRate       *float64 `hcl:"failure_rate"`
	Fail              *bool    `hcl:"fail"`
	FailReschedulable *bool    `hcl:"fail_reschedulable"`
	LiveMigrationTime *string  `hcl:"live_migration_time"`
	FailLiveCheck     *bool    `hcl:"fail_live_check"`
	FailLiveStart     *bool    `hcl:"fail_live_start"`
	FailLiveOut       *bool    `hcl:"fail_live_out"`
	Body              hcl.Body `hcl:",body"`
}

type rawIdentity struct {
	Bind        *string              `hcl:"bind"`
	TokenTTL    *string              `hcl:"token_ttl"`
	Region      *string              `hcl:"region"`
	Users       []rawIdentityUser    `hcl:"user,block"`
	Projects    []rawIdentityProject `hcl:"project,block"`
	Assignments []rawAssignment      `hcl:"assignment,block"`
	Endpoints   []rawEndpoint        `hcl:"endpoint,block"`
	DefRange    hcl.Range            `hcl:",def_range"`
	Body        hcl.Body             `hcl:",body"`
}

type rawIdentityUser struct {
	Name         string    `hcl:"name,label"`
	ID           *string   `hcl:"id"`
	PasswordHash *string   `hcl:"password_hash"`
	LabelRange   hcl.Range `hcl:"name,label_range"`
	DefRange     hcl.Range `hcl:",def_range"`
	Body         hcl.Body  `hcl:",body"`
}

type rawIdentityProject struct {
	Name       string    `hcl:"name,label"`
	ID         *string   `hcl:"id"`
	LabelRange hcl.Range `hcl:"name,label_range"`
	DefRange   hcl.Range `hcl:",def_range"`
	Body       hcl.Body  `hcl:",body"`
}

type rawAssignment struct {
	User     *string   `hcl:"user"`
	Project  *string   `hcl:"project"`
	System   *string   `hcl:"system"`
	Role     *string   `hcl:"role"`
	DefRange hcl.Range `hcl:",def_range"`
	Body     hcl.Body  `hcl:",body"`
}

type rawEndpoint struct {
	Type       string    `hcl:"type,label"`
	Public     *string   `hcl:"public"`
	Internal   *string   `hcl:"internal"`
	Admin      *string   `hcl:"admin"`
	LabelRange hcl.Range `hcl:"type,label_range"`
	DefRange   hcl.Range `hcl:",def_range"`
	Body       hcl.Body  `hcl:",body"`
}
