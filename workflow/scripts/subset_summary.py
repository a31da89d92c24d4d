from horizon.placeholder import not_implemented

not_implemented("select", issue=4)
