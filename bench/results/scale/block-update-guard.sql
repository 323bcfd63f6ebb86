BEGIN;
INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
  SELECT 'trig' || lpad(g::text, 17, '0'), 'big', 'ingest-10k', (SELECT peer_name FROM messages WHERE session_name='ingest-10k' LIMIT 1), 100000 + g, 'x ' || g
  FROM generate_series(1, 100) g;
EXPLAIN (ANALYZE, COSTS OFF, TIMING ON) UPDATE messages m SET embedding = (SELECT embedding FROM messages WHERE session_name='ingest-10k' AND seq_in_session = 1)
  WHERE m.session_name = 'ingest-10k' AND m.seq_in_session > 100000;
ROLLBACK;
