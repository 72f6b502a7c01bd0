-- Which way a metric is better, as the check declares it or as its reference's one-sided
-- bound implies it: `verdict --explain` says which ("implied by its reference"), where
-- both read "declared by the check" before.
ALTER TABLE metric_direction ADD COLUMN implied boolean NOT NULL DEFAULT false;
