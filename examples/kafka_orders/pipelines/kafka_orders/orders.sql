create table orders (
  order_id bigint not null,
  country string,
  amount decimal(10, 2),
  ordered_at timestamp
);

-- Revenue and order count per country, maintained from each step's new orders.
create materialized view country_totals as
select country, sum(amount) as revenue, count(*) as orders
from orders
group by country;
