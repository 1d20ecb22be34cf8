-- Feldera's bootstrapping example, on Spark: student grades and per-class averages.
create table students (
  id bigint,
  name string
) with (
  'materialized' = 'true'
);

create table grades (
  student_id bigint,
  class string,
  grade decimal(5,2),
  class_date date
) with (
  'materialized' = 'true'
);

-- Average grade per student per class over a fixed date range.
create view avg_grade as
select
  student_id,
  class,
  avg(grade) as class_avg
from grades
where
  class_date >= date '{{ start_date }}' and class_date <= date '{{ end_date }}'
group by student_id, class;

-- Similar to avg_grade, but contains the student's name instead of the id.
create materialized view avg_grade_enriched as
select
  name as student_name,
  class,
  class_avg
from
  avg_grade join students on avg_grade.student_id = students.id;
