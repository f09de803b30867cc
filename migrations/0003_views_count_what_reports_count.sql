-- The public views count the cells a report counts: per arm its completed
-- cells, or, for an arm without one, all of its cells (the report then marks
-- the arm's numbers as partial). Until now arm_metric_stats averaged failed
-- and interrupted cells in with the completed ones, so a pandas user saw
-- other numbers than `lcx report`. Each row also carries its cell's status,
-- for whoever wants the rest.

DROP VIEW arm_metric_stats;
DROP VIEW run_metric_stats;
DROP VIEW metrics_current;

CREATE VIEW metrics_current AS
SELECT r.experiment_id, m.run_id, r.arm, r.repeat, m.iteration, m.name, m.value,
       CASE WHEN m.iteration <= COALESCE(r.warmup, e.warmup) THEN 1 ELSE 0 END AS warmup,
       r.status,
       CASE WHEN r.status = 'completed'
                 OR NOT EXISTS (SELECT 1 FROM runs c
                                WHERE c.experiment_id = r.experiment_id
                                  AND c.arm = r.arm AND c.status = 'completed')
            THEN 1 ELSE 0 END AS counted
FROM metrics m
JOIN runs r ON r.id = m.run_id
JOIN experiments e ON e.id = r.experiment_id
WHERE m.superseded = 0;

CREATE VIEW run_metric_stats AS
SELECT experiment_id, run_id, arm, repeat, name, status, counted,
       COUNT(*)                 AS n,
       AVG(value)               AS mean,
       MIN(value)               AS min,
       MAX(value)               AS max,
       SUM(value)               AS sum,
       SUM(value * value)       AS sum_sq,
       CASE WHEN COUNT(*) > 1
            THEN max(0.0, (SUM(value * value) - SUM(value) * SUM(value) / COUNT(*)) / (COUNT(*) - 1))
       END                      AS variance
FROM metrics_current
WHERE warmup = 0
GROUP BY experiment_id, run_id, arm, repeat, name;

-- Only the counted cells: the same n and mean as the report's pooled figures.
CREATE VIEW arm_metric_stats AS
SELECT experiment_id, arm, name,
       COUNT(*)                 AS n,
       COUNT(DISTINCT run_id)   AS runs,
       AVG(value)               AS mean,
       MIN(value)               AS min,
       MAX(value)               AS max,
       SUM(value)               AS sum,
       SUM(value * value)       AS sum_sq,
       CASE WHEN COUNT(*) > 1
            THEN max(0.0, (SUM(value * value) - SUM(value) * SUM(value) / COUNT(*)) / (COUNT(*) - 1))
       END                      AS variance
FROM metrics_current
WHERE warmup = 0 AND counted = 1
GROUP BY experiment_id, arm, name;
