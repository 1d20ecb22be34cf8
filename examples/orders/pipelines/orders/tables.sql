-- Inputs, fed by the files connectors in pipeline.yaml.
create table orders (
  order_id bigint not null,
  customer_id bigint,
  product_id bigint,
  quantity int,
  unit_price decimal(10,2),
  order_date date,
  primary key (order_id)
) with ('materialized' = 'true');

create table customers (
  customer_id bigint not null,
  name string,
  country string,
  primary key (customer_id)
) with ('materialized' = 'true');

create table products (
  product_id bigint not null,
  name string,
  category string,
  primary key (product_id)
) with ('materialized' = 'true');
