"""Request and response bodies, one module per entity (Create/Update/Public families)."""
