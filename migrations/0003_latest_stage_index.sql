-- The cluster list asks for the newest operation of each (cluster, kind): with the id in the
-- index that is one seek per group instead of a scan of every operation of the clusters.
CREATE INDEX operations_latest ON operations(cluster, kind, id);
