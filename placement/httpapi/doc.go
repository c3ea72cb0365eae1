// Package httpapi is OpenStack Placement's REST API (microversions 1.0 to
// 1.39) over a placement.Service, answering as Placement 8.0 does, down to
// the words of its errors: the conformance suite (Placement's own
// gabbits, conformance_test.go) compares them.
//
// A reader finds every route in the table in routes.go: method, path, the
// microversions it serves, its policy, whether it loads the provider, and
// its handler. route.serve makes the checks Placement's decorators make,
// in their order; api.go holds the pipeline around them (request id,
// auth, microversion, the error bodies), and there is one file per family of
// handlers (providers.go, inventories.go, allocations.go, candidates.go,
// names.go for traits and resource classes, traits_aggs.go for a
// provider's traits and aggregates, reshaper.go). The handlers read and
// write through the service's exported methods only; the index's lock and
// maps stay inside package placement.
package httpapi
