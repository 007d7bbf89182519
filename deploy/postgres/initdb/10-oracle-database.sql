-- Runs once, when the postgres volume is first initialised (official image and the local
-- one alike). The oracle gets a database of its own: it is a separate party from the API
-- and must not share (or be able to touch) the API's tables.
CREATE DATABASE oracle;
