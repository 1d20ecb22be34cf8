-- One row per order with its amount and category.
create view order_lines as
select o.order_id, o.customer_id, o.order_date, p.category,
       o.quantity * o.unit_price as amount
from orders o join products p on o.product_id = p.product_id;

-- Revenue per customer.
create materialized view customer_revenue as
select customer_id, sum(amount) as revenue, count(*) as orders
from order_lines
group by customer_id;

-- Revenue per country: customers joined in.
create materialized view country_revenue as
select c.country, sum(r.revenue) as revenue, sum(r.orders) as orders
from customer_revenue r join customers c on r.customer_id = c.customer_id
group by c.country;

-- Countries above a threshold (a Jinja variable).
create materialized view big_countries as
select country, revenue
from country_revenue
where revenue > {{ big_country_revenue }};

-- Revenue per category and month.
create materialized view category_months as
select category, date_trunc('month', order_date) as month, sum(amount) as revenue
from order_lines
group by category, date_trunc('month', order_date);
