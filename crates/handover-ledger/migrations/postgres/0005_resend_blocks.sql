-- An unknown operation being re-sent (claimed again after a dispatch)
-- still blocks the other operations of its action within a block width:
-- the blocker index covers those rows too.
DROP INDEX operations_unresolved;
CREATE INDEX operations_unresolved ON operations (action, scope, created_at)
    WHERE state = 'unknown' OR state = 'dispatched' OR (state = 'claimed' AND dispatch_count > 0);
