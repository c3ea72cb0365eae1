package conductor

// SuperconductorRole is the member role superconductors register under
// (/members/superconductor/<id>), so the scheduler leader can tell a
// backlog from requests nobody will take.
const SuperconductorRole = "superconductor"

// CellConductorRole names a cell conductor's queue holder:
// "conductor-<cell>@<host>/<pid>/<rand>".
const CellConductorRole = "conductor"
