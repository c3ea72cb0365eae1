package etcdschema

// PlacementPrefix holds every placement key (providers, consumers, names,
// custom traits and classes), so one watch can follow all of them.
func (k Keys) PlacementPrefix() string { return k.join("placement") + "/" }
