package etcdschema

import (
	"math"
	"slices"
	"time"
)

// Versions of placement's stored values (see values.go for the rules).
const (
	ProviderVersion            = 1
	ConsumerVersion            = 1
	CustomTraitVersion         = 1
	CustomResourceClassVersion = 1
	ProviderNameVersion        = 1
)

// Inventory is one resource class of a provider's inventory, with the
// Placement API's field names so the HTTP layer can reuse it. A reserved
// of 0 is left out of the record (omitempty): every reader, an older
// Berth's included, decodes a missing member as 0, so the record needs
// no new version; the Placement API writes its own "reserved"
// (placement/httpapi serializeInventory). The other members stay even
// at their usual values (1): an older reader would take a missing one
// for 0.
type Inventory struct {
	Total           int64   `json:"total"`
	Reserved        int64   `json:"reserved,omitempty"`
	MinUnit         int64   `json:"min_unit"`
	MaxUnit         int64   `json:"max_unit"`
	StepSize        int64   `json:"step_size"`
	AllocationRatio float64 `json:"allocation_ratio"`
}

// Capacity is Placement's rule: int((total - reserved) * allocation_ratio).
// The float conversion mirrors Placement's SQL so figures match exactly.
func (i Inventory) Capacity() int64 {
	c := float64(i.Total-i.Reserved) * i.AllocationRatio
	// A large ratio (up to 3.4e38 is valid) must not wrap around.
	switch {
	case c >= math.MaxInt64:
		return math.MaxInt64
	case c <= math.MinInt64:
		return math.MinInt64
	}
	return int64(c)
}

// Provider is a resource provider record stored at Keys.Provider(uuid). The
// usages live here, not under the consumers, so that a claim is one
// transaction comparing each touched provider's mod revision; Generation is
// bumped by every write so it doubles as Placement's provider generation.
//
// Traits and Aggregates are left out of the record when empty
// (omitempty): a reader, an older Berth's included, decodes a missing
// member as nil, as it decoded the null every provider without them
// carried, and the readers that index them take nil as none
// (normalizeProvider in package placement makes it an empty list). With
// Inventory's reserved 0, that is ~60 of a compute node's ~710 bytes,
// and the provider is put by every claim (docs/flows.md, W3).
type Provider struct {
	header
	UUID               string               `json:"uuid"`
	Name               string               `json:"name"`
	Generation         int64                `json:"generation"`
	ParentProviderUUID string               `json:"parent_provider_uuid,omitempty"`
	RootProviderUUID   string               `json:"root_provider_uuid"`
	Inventories        map[string]Inventory `json:"inventories"`
	Traits             []string             `json:"traits,omitempty"`
	Aggregates         []string             `json:"aggregates,omitempty"`
	Usages             map[string]int64     `json:"usages"`
	CreatedAt          time.Time            `json:"created_at"`
	UpdatedAt          time.Time            `json:"updated_at"`
}

func (*Provider) SchemaVersion() int { return ProviderVersion }

// Clone returns a deep copy, so a caller may mutate it without touching a
// value shared with an index or another goroutine.
func (p *Provider) Clone() *Provider {
	c := *p
	c.Inventories = make(map[string]Inventory, len(p.Inventories))
	for k, v := range p.Inventories {
		c.Inventories[k] = v
	}
	c.Traits = append([]string(nil), p.Traits...)
	c.Aggregates = append([]string(nil), p.Aggregates...)
	c.Usages = make(map[string]int64, len(p.Usages))
	for k, v := range p.Usages {
		c.Usages[k] = v
	}
	return &c
}

// ConsumerAllocation is what one consumer holds on one provider.
type ConsumerAllocation struct {
	Resources map[string]int64 `json:"resources"`
}

// AllocationOrder is the order a consumer's allocations were written in,
// where it is not the sorted one: Placement answers a consumer's
// allocations in the order it wrote them. It hangs off the record by a
// pointer, nil for the usual write (the scheduler's claims give no order),
// so a million indexed consumers pay a word each for it.
type AllocationOrder struct {
	// Providers lists the providers in the order written (nil: sorted).
	Providers []string `json:"providers,omitempty"`
	// Classes lists, per provider, its classes in the order written,
	// for the providers where that is not sorted.
	Classes map[string][]string `json:"classes,omitempty"`
}

// Consumer is a consumer's allocations, stored at Keys.Consumer(uuid). A
// consumer with no allocations is deleted, as Placement does.
type Consumer struct {
	header
	UUID         string                        `json:"uuid"`
	Generation   int64                         `json:"generation"`
	ProjectID    string                        `json:"project_id"`
	UserID       string                        `json:"user_id"`
	ConsumerType string                        `json:"consumer_type,omitempty"`
	Allocations  map[string]ConsumerAllocation `json:"allocations"`
	// Order is the order Allocations were written in, where it is not
	// sorted (nil: all sorted, as records written before it was kept).
	Order     *AllocationOrder `json:"order,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// ProvidersWritten is the order c's providers were written in, nil when
// it kept none (they read as sorted).
func (c *Consumer) ProvidersWritten() []string {
	if c.Order == nil {
		return nil
	}
	return c.Order.Providers
}

// ClassesWritten is the order c's classes on provider rp were written
// in, nil when it kept none (they read as sorted).
func (c *Consumer) ClassesWritten(rp string) []string {
	if c.Order == nil {
		return nil
	}
	return c.Order.Classes[rp]
}

func (*Consumer) SchemaVersion() int { return ConsumerVersion }

// Clone returns a deep copy.
func (c *Consumer) Clone() *Consumer {
	n := *c
	n.Allocations = make(map[string]ConsumerAllocation, len(c.Allocations))
	for rp, a := range c.Allocations {
		r := make(map[string]int64, len(a.Resources))
		for k, v := range a.Resources {
			r[k] = v
		}
		n.Allocations[rp] = ConsumerAllocation{Resources: r}
	}
	if c.Order != nil {
		o := AllocationOrder{Providers: slices.Clone(c.Order.Providers)}
		if c.Order.Classes != nil {
			o.Classes = make(map[string][]string, len(c.Order.Classes))
			for rp, cs := range c.Order.Classes {
				o.Classes[rp] = slices.Clone(cs)
			}
		}
		n.Order = &o
	}
	return &n
}

// CustomTrait is stored at Keys.CustomTrait(name) for a created CUSTOM_* trait.
type CustomTrait struct {
	header
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

func (*CustomTrait) SchemaVersion() int { return CustomTraitVersion }

// CustomResourceClass is stored at Keys.CustomResourceClass(name).
type CustomResourceClass struct {
	header
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

func (*CustomResourceClass) SchemaVersion() int { return CustomResourceClassVersion }

// ProviderName reserves a provider name, stored at Keys.ProviderName(name).
type ProviderName struct {
	header
	UUID string `json:"uuid"`
}

func (*ProviderName) SchemaVersion() int { return ProviderNameVersion }
